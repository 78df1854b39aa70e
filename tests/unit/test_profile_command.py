"""bench/profile_command.py runs a command under torch.profiler and writes where its time went."""

import json

from bench import profile_command


def test_a_profiled_command_writes_its_host_time_and_status(tmp_path, capsys):
    out = tmp_path / "profile.json"
    assert profile_command.main(["--out", str(out), "--", "params", "--json"]) == 0
    result = json.loads(out.read_text())
    assert result["command"] == ["params", "--json"] and result["status"] == 0
    assert result["top_host_operators"] and all(
        row["calls"] > 0 for row in result["top_host_operators"]
    )
    assert result["kernels"] is None  # no GPU: no kernels to count
    assert '"base"' in capsys.readouterr().out  # the command's own output is left as it is
