"""The served Chinese font covers every character the app can show: its own Chinese text and everything in
the shipped checkpoints' headers (vocabularies, tokenizers). A retrained model brings new characters; the
font subset must then be rebuilt (scripts/build_cjk_font.py), or they are drawn as empty boxes on a machine
without CJK fonts."""

from __future__ import annotations

from fontTools.ttLib import TTFont

from tests.scripts_support import load_script


def test_the_served_font_covers_every_chinese_character_the_app_can_show():
    build = load_script("scripts/build_cjk_font.py")
    covered = set(TTFont(build.OUT).getBestCmap())
    shown = build.app_text_chars() | build.checkpoint_chars()
    assert len(shown) > 1000, "the shipped eng-cmn model alone shows thousands of characters"
    missing = sorted(c for c in shown if ord(c) not in covered)
    assert not missing, f"{len(missing)} characters are not in the font: {''.join(missing[:80])}"
