"""`opmatrix hosts [MATRIX]`: this host's devices (or every node's of a Ray cluster), which matrix devices they
satisfy and why the others do not (opmatrix.scheduling.fleet)."""
from __future__ import annotations

from opmatrix import paths
from opmatrix.commands.common import matrix_argument, subcommand


def add_parser(sub) -> None:
    h = subcommand(sub, "hosts", "show this host's devices (or every node's of a Ray cluster), with driver and "
                   "runtime, which matrix devices they satisfy and why the others do not",
                   "  opmatrix hosts matrix/h200.toml\n  opmatrix hosts matrix/fleet.toml --address ray://head:10001",
                   handle)
    matrix_argument(h)
    h.add_argument("--address", help="a Ray cluster: explain every live node's devices, from what each advertises")


def handle(args) -> int:
    from opmatrix.matrix import load_matrix
    from opmatrix.scheduling import fleet, hosts

    devices = load_matrix(paths.matrix_file(args.matrix)).device
    if args.address:
        import ray

        from opmatrix.scheduling.ray_cluster import check_reachable, log_level

        check_reachable(args.address)
        ray.init(address=args.address, log_to_driver=False, logging_level=log_level())
        try:
            lines = fleet.explain_cluster(devices, ray.nodes())
        finally:
            ray.shutdown()
    else:
        lines = fleet.explain(devices, hosts.detect_local())
    print("\n".join(lines))
    return 0
