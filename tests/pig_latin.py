"""A small English -> pig latin corpus for the tests of training on your own data (no download)."""

from __future__ import annotations

import random
from pathlib import Path

SUBJECTS = ("the cat", "the dog", "my friend", "a bird", "the farmer", "her brother", "our teacher", "a child")
VERBS = ("sees", "likes", "finds", "eats", "keeps", "wants", "paints", "helps")
OBJECTS = ("the apple", "a ball", "the house", "an egg", "the old tree", "a green box", "my hat", "the river")
ENDINGS = ("", " today", " again", " every day")


def pig_latin_word(word: str) -> str:
    """igpay atinlay: a leading vowel gets "way", else the leading consonants move to the end before "ay"."""
    vowels = "aeiou"
    if word[0] in vowels:
        return word + "way"
    first = next((i for i, c in enumerate(word) if c in vowels), len(word))
    return word[first:] + word[:first] + "ay"


def pig_latin(sentence: str) -> str:
    return " ".join(pig_latin_word(w) for w in sentence.split())


def pairs(n: int = 300, seed: int = 0) -> list[tuple[str, str]]:
    """n distinct English sentences (subject verb object [ending]) with their pig latin."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    while len(out) < n:
        english = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{rng.choice(ENDINGS)}"
        out.setdefault(english, pig_latin(english))
    return list(out.items())


def write_tsv(path: Path, n: int = 300, seed: int = 0) -> Path:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs(n, seed)), encoding="utf-8")
    return path
