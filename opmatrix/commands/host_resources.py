"""`opmatrix host-resources`: the `ray start` arguments that advertise this host's devices, detected from the host
(opmatrix.scheduling.resources), or the resources and labels as JSON."""
from __future__ import annotations

import json
import sys

from opmatrix.commands.common import json_argument, subcommand


def add_parser(sub) -> None:
    hr = subcommand(sub, "host-resources", "print the `ray start` arguments that advertise this host's devices "
                    "(GPU model, arch, vendor, count), detected from the host itself",
                    "  eval ray start --address=HEAD:6379 $(opmatrix host-resources)\n"
                    "  opmatrix host-resources --json", handle)
    json_argument(hr)


def handle(args) -> int:
    from opmatrix.scheduling import hosts, resources

    devices = hosts.detect_local()
    if args.json:
        json.dump({"resources": resources.host_resources(devices), "labels": resources.host_labels(devices),
                   "num_gpus": sum(1 for d in devices if d.vendor != "cpu")}, sys.stdout, indent=1)
        print()
    else:
        print(resources.ray_start_args(devices))
    return 0
