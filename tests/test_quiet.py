"""course_utils.quiet: the frameworks start without alarming log lines, and chosen logs can be read.

One subprocess (a fresh interpreter, as a notebook kernel is) imports both frameworks through
``quiet`` and provokes the lines that used to show; its stderr is the evidence.
"""

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    from course_utils import quiet

    tf = quiet.tensorflow()
    print("tf eager:", tf.executing_eagerly())
    torch = quiet.torch()

    class Gate(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent: export logs a symbolic-shapes warning
                return x * 2
            return -x

    try:
        torch.export.export(Gate(), (torch.ones(3),))
    except Exception as err:
        print("export refused:", type(err).__name__)

    def f(x):
        return x.sin() + 1

    compiled = torch.compile(f, backend="eager")
    with quiet.torch_logs("recompiles") as lines:
        compiled(torch.ones(3))
        compiled(torch.ones(4))
    print("captured:", "|".join(lines))
    compiled(torch.ones(2, 2))  # another recompilation, after the block: not logged
    print("after:", tf.constant(2.0).numpy() * 2)
""")


def test_quiet_frameworks_and_captured_logs():
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    out, err = result.stdout, result.stderr
    # TensorFlow's C++ start-up notices and Dynamo/symbolic-shapes warnings are gone from stderr
    for noise in ("oneDNN custom operations", "absl::InitializeLog", "Unable to find user code",
                  "Recompiling function"):
        assert noise not in err, f"{noise!r} still on stderr:\n{err[-2000:]}"
    assert "tf eager: True" in out and "after: 4.0" in out, out
    assert "export refused: GuardOnDataDependentSymNode" in out, out
    # the recompilation inside the block was collected, without the log prefix (level, time, file)
    captured = next(line for line in out.splitlines() if line.startswith("captured:"))
    assert "Recompiling function f" in captured, captured
    assert "size mismatch at index 0. expected 3, actual 4" in captured, captured
    assert "W1" not in captured and "guards.py" not in captured, captured
