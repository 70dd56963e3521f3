"""Getting around by key: each pane on Alt+its number, F6 between the form and the panes.

Reaching a pane by Tab took 25-30 presses through the form's fields. The keys are priority
bindings, so they work while a field has focus; a pane added to TABS gets the next number, the
tenth 0 (the digits as the keyboard's row has them).

Most terminals (xterm, GNOME Terminal, tmux) send Alt+digit as ESC and the digit, which Textual
reads as the character macOS's Option+digit types ("ª" for 9, after WezTerm on macOS); only
terminals with the kitty keyboard protocol send alt+digit itself. So each pane also answers its
digit's character, on the main screen only: the main screen's fields (PaneKeysInput) leave
those characters to the pane keys, while in a dialog they are typed (a "£" in a preset's
description stays a "£").
"""

from __future__ import annotations

from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input


def alt_digit_keys() -> dict[int, str]:
    """The key Textual reads for ESC and each digit 0-9 (from its own table of sequences: the
    character's key name, e.g. "pound_sign" for 3)."""
    try:
        from textual._ansi_sequences import ANSI_SEQUENCES_KEYS
        from textual.keys import _character_to_key
    except ImportError:  # a Textual that moved them: alt+digit alone
        return {}
    read = {d: ANSI_SEQUENCES_KEYS.get(f"\x1b{d}") for d in range(10)}
    return {d: _character_to_key(c) for d, c in read.items() if isinstance(c, str) and len(c) == 1}


ALT_DIGIT_KEYS = alt_digit_keys()


class PaneKeysInput(Input):
    """A field of the main screen (the form, the Sweep pane's varies): the characters terminals
    send for Alt+digit reach the pane keys instead of the field, which no such character fits."""

    # An Input's virtual size follows its text, and Widget declares it a layout change: every key
    # typed re-laid the whole screen out (a third of the History filter's answer to a key). The text
    # scrolls within the field and nothing else moves: a repaint is all it needs.
    virtual_size = Reactive(Size(0, 0), layout=False)

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return key not in ALT_DIGIT_KEYS.values() and super().check_consume_key(key, character)


DIGIT_PANES = 10  # Alt+1 ... Alt+9, Alt+0; the panes after them have keys of their own
LATER_KEYS = ("f2", "f3", "f4")  # the eleventh pane's (History), the twelfth's (Search), Hunt's


def pane_digit(index: int) -> int:
    """The digit whose Alt key shows the pane at `index` (from 0): 1 ... 9, then 0."""
    return (index + 1) % 10


def pane_key(index: int) -> str:
    """The key that shows the pane at `index`, as help and the palette name it."""
    return f"Alt+{pane_digit(index)}" if index < DIGIT_PANES else LATER_KEYS[index - DIGIT_PANES].upper()


def pane_bindings(titles: list[str]) -> list[Binding]:
    """Alt+1 ... Alt+9, Alt+0 show the panes in their order (and the characters terminals send for
    them); the footer names the scheme once."""
    sent = ALT_DIGIT_KEYS
    digits = {i: pane_digit(i - 1) for i in range(1, min(len(titles), DIGIT_PANES) + 1)}
    keys = {i: ",".join(k for k in (f"alt+{d}", sent.get(d)) if k) for i, d in digits.items()}
    keys |= {i: LATER_KEYS[i - 1 - DIGIT_PANES] for i in range(DIGIT_PANES + 1, len(titles) + 1)}
    return [
        Binding(
            keys[i],
            f"show_pane({i - 1})",
            "Panes" if i == 1 else title,
            key_display=f"alt+1…{digits[len(digits)]}" if i == 1 else None,
            show=i == 1,
            priority=True,
        )
        for i, title in enumerate(titles, start=1)
    ] + [Binding("f6", "switch_region", "Form/panes", priority=True)]
