"""What a query gives the stages to read (ctxbudget.query): the options a comparison names and
the signals a troubleshooting question carries."""

from __future__ import annotations

from ctxbudget.query import comparison_options, troubleshooting_signals


def test_troubleshooting_signals_are_codes_versions_and_environments() -> None:
    """Error codes, versions and hex values are kept lower-cased with the named platforms;
    ordinary words are not signals."""
    assert troubleshooting_signals("acme status fails with E401 on Ubuntu 22.04, code 0x1F") == {
        "e401",
        "ubuntu",
        "22.04",
        "0x1f",
    }
    assert troubleshooting_signals("why does the login page hang") == frozenset()


def test_comparison_options_drop_the_shared_words() -> None:
    """'Basic plan vs Pro plan' compares Basic and Pro, not plans."""
    assert comparison_options("Compare the Basic plan vs the Pro plan") == [
        frozenset({"basic"}),
        frozenset({"pro"}),
    ]
    assert comparison_options("difference between postgres and mysql") == [
        frozenset({"postgres"}),
        frozenset({"mysql"}),
    ]
    assert comparison_options("what is postgres") == []


def test_comparison_options_read_the_names() -> None:
    """The options of a comparison are the names compared, multi-word names whole."""
    assert comparison_options("Who is older, Sid Haig or Vic Darchinyan?") == [
        frozenset({"sid", "haig"}),
        frozenset({"vic", "darchinyan"}),
    ]
    assert comparison_options("Are Medici and Senet both board games?") == [
        frozenset({"medici"}),
        frozenset({"senet"}),
    ]


def test_a_parenthetical_qualifier_does_not_hide_an_option() -> None:
    """ "North Marion High School (Oregon) and Seoul High School": the first option is the
    school, not its qualifier."""
    options = comparison_options(
        "Are North Marion High School (Oregon) and Seoul High School both in the same country?"
    )
    assert options and "oregon" not in options[0] and "marion" in options[0]
