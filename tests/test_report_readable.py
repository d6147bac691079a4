"""A new user's report reads well (issue 45): the matrix's description under the report's title, failure reasons
in full in report.md and report.html, and in the terminal a shortened reason that ends in "..." at a word and
says where the full text is; tables that fit a pipe."""
from opmatrix import report
from opmatrix.manifest import RunManifest
from opmatrix.matrix import load_matrix
from opmatrix.report.html.run_page import run_page
from opmatrix.run import new_manifest
from tests.helpers import probe_adapter, probe_matrix, report_frame, report_result, write_plugins


def test_the_matrix_description_is_recorded_and_shown_in_report_md_and_html(tmp_path):
    write_plugins(tmp_path, "probe", {"torch": "def build(w, dtype, device, variant):\n    return None\n"},
                  probe_adapter())
    path = probe_matrix(tmp_path, "described", ["torch"], ["quick"], timeout_s=60, rep_ms=5)
    path.write_text('description = "Nightly softmax check <for> the H200 fleet"\n'
                    + path.read_text().replace('arch = "auto"', 'arch = "auto"\ndescription = "the driver host"'))
    manifest = new_manifest(load_matrix(path), "r", [], None)
    assert manifest.description == "Nightly softmax check <for> the H200 fleet"
    assert manifest.devices == {"cpu": "the driver host"}
    assert RunManifest.from_json(manifest.to_json()).description == manifest.description  # kept in run.json
    df = report_frame(report_result("torch", median_ms=1.0))
    text = report.markdown(df, manifest)
    assert text.splitlines()[2] == "Nightly softmax check <for> the H200 fleet"  # under the title
    assert text.splitlines()[4] == "device `cpu`: the driver host"
    assert "Nightly softmax check &lt;for&gt; the H200 fleet" in run_page(df, manifest)
    older = RunManifest.from_json('{"run_id": "r"}')  # a run.json written before: no line, no error
    assert report.markdown(df, older).splitlines()[2].startswith("matrix ``")
