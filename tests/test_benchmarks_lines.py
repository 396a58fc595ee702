"""benchmarks/lines.py, issue 31's line figures: code lines leave out blank, comment and
docstring lines, and nothing else."""

from __future__ import annotations

import sys
import textwrap

from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import lines

SAMPLE = textwrap.dedent(
    '''
    """Module docstring,
    two lines."""

    import os  # a comment


    def f(x: int) -> str:
        """Docstring."""
        # a comment line
        text = """a string
        that is data, not a docstring"""
        return text + str(
            x
        )
    '''
)


def test_code_lines_count_statements_and_data_strings_only() -> None:
    # import, def, the two lines of the assigned string, and the three of the return
    assert lines.code_lines(SAMPLE) == 7


def test_a_file_of_prose_counts_nothing() -> None:
    assert lines.code_lines('"""Only a docstring."""\n# and a comment\n\n') == 0
