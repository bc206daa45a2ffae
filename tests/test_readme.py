"""The README's library examples run and print what they claim."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def library_examples() -> list[str]:
    section = README.read_text().split("## Library example", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_library_examples_run_and_print_what_they_claim() -> None:
    examples = library_examples()
    assert len(examples) >= 2
    for code in examples:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), {})
        claimed = re.findall(r"print\(.*\)[ \t]+# (.+)", code)
        assert printed.getvalue().splitlines() == claimed
