"""Rebuild static/fonts/explorer-cjk.woff2: the Chinese font the app serves, so Chinese renders on a
machine without CJK fonts (a bare lab PC, headless Chromium).

A subset of Noto Sans CJK SC (SIL Open Font License 1.1, static/fonts/OFL.txt) to the characters the
app can show: the 3,755 most common simplified characters (GB 2312 level 1), every CJK character in the
app's own text (the Chinese UI and Learn page) and in the shipped checkpoints' headers (vocabularies,
tokenizers, examples), and CJK punctuation and full-width forms. Renamed "Explorer CJK" (a modified
version, as the licence asks). Development-time only; the app never runs fontTools.

    apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb noto
    bash scripts/setup.sh   # fontTools and brotli are the project's own dependencies
    .venv/bin/python scripts/build_cjk_font.py noto/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTCollection

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "static" / "fonts" / "explorer-cjk.woff2"
FAMILY = "Explorer CJK"
SC_NAME = "Noto Sans CJK SC"
# Code points the font is for (the app's @font-face unicode-range lists the same blocks).
CJK_BLOCKS = ((0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3100, 0x312F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
              (0xF900, 0xFAFF), (0xFE10, 0xFE1F), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF))


def is_cjk(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in CJK_BLOCKS)


def gb2312_level1() -> set[str]:
    """GB 2312's first level: the 3,755 most frequent simplified characters (rows 16-55)."""
    chars = set()
    for row in range(0xB0, 0xD8):
        for cell in range(0xA1, 0xFF):
            try:
                chars.add(bytes((row, cell)).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return chars


def app_text_chars() -> set[str]:
    """Every CJK character in the app's source (the Chinese UI strings and the Learn page text)."""
    chars: set[str] = set()
    for path in list((ROOT / "explorer").rglob("*.py")) + [ROOT / "app.py"]:
        chars |= {ch for ch in path.read_text(encoding="utf-8") if is_cjk(ch)}
    return chars


def checkpoint_chars() -> set[str]:
    """Every CJK character in the shipped checkpoints' JSON headers (what a model can output)."""
    chars: set[str] = set()
    for path in (ROOT / "pretrained").glob("*.safetensors"):
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        chars |= {ch for ch in json.dumps(header.get("__metadata__", {}), ensure_ascii=False) if is_cjk(ch)}
    return chars


def punctuation() -> set[str]:
    return {chr(c) for lo, hi in ((0x3000, 0x303F), (0xFF01, 0xFF5E), (0xFE10, 0xFE1F), (0xFE30, 0xFE4F))
            for c in range(lo, hi + 1)}


def build(source: Path, out: Path = OUT) -> tuple[int, int]:
    """Write the subset; returns (characters kept, bytes)."""
    collection = TTCollection(str(source))
    font = next(f for f in collection.fonts if f["name"].getDebugName(4) == SC_NAME)
    wanted = gb2312_level1() | app_text_chars() | checkpoint_chars() | punctuation()
    covered = set(font.getBestCmap())
    unicodes = sorted(ord(ch) for ch in wanted if ord(ch) in covered)
    missing = sorted(ch for ch in app_text_chars() | checkpoint_chars() if ord(ch) not in covered)
    if missing:
        print(f"not in the source font: {''.join(missing)}", file=sys.stderr)
    options = subset.Options()
    options.flavor = "woff2"
    options.hinting = False
    options.desubroutinize = True
    options.layout_features = ["*"]
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=unicodes)
    subsetter.subset(font)
    _rename(font)
    out.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff2"
    font.save(str(out))
    return len(unicodes), out.stat().st_size


def _rename(font) -> None:
    """A modified version takes its own name (SIL OFL 1.1, condition 3 spirit; the source has no
    Reserved Font Name, but a subset should not pass as the full Noto font)."""
    names = {1: FAMILY, 3: f"{FAMILY} Regular; subset of {SC_NAME}", 4: FAMILY,
             6: FAMILY.replace(" ", "") + "-Regular"}
    for record in font["name"].names:
        if record.nameID in names:
            record.string = names[record.nameID]
    font["name"].names = [r for r in font["name"].names if r.nameID not in (16, 17, 21, 22)]
    if "CFF " in font:
        cff = font["CFF "].cff
        cff.fontNames = [names[6]]
        top = cff.topDictIndex[0]
        top.FullName = FAMILY
        top.FamilyName = FAMILY


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="NotoSansCJK-Regular.ttc (Debian: fonts-noto-cjk)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    count, size = build(args.source, args.out)
    print(f"wrote {args.out} ({count:,} characters, {size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
