"""Command-line mistakes found by a ninth independent round of testing (SPEC §6, §7):
``--stride`` / ``--kernel`` describe a conv layer, so ``show`` and ``tune`` of another
workload refuse them as ``bench`` does, instead of ignoring them."""
import pytest

from schedlang import cli


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHEDLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BEAM", raising=False)


@pytest.mark.parametrize("argv, message", [
    (["show", "gemm", "--size", "16", "--stride", "2"],
     "--stride / --kernel choose the conv layer; show gemm has no conv: leave them out, "
     "or show conv"),
    (["tune", "softmax", "--size", "8", "--kernel", "1", "--budget-s", "1"],
     "--stride / --kernel choose the conv layer; tune softmax has no conv: leave them out, "
     "or tune conv"),
    (["bench", "blur", "--size", "8", "--stride", "2"],
     "--stride / --kernel choose the conv layer; bench blur has no conv"),
])
def test_conv_options_for_another_workload_are_refused_by_every_command(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert message in str(e.value.code)
    assert capsys.readouterr().out == ""      # nothing shown or tuned before the refusal


def test_show_of_a_conv_variant_still_takes_the_conv_options(capsys):
    assert cli.main(["show", "conv", "--size", "1x8x8x8x8", "--kernel", "1"]) in (0, None)
    out = capsys.readouterr().out
    assert "W = Input(float32, (8, 8, 1, 1))" in out and "# loop IR" in out
