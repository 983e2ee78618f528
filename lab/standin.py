"""The lab's stand-in for a video: a long text prefix, unique per video.

On the cluster a worker spends its prefill on a video; asking a second question about the same
video on the same worker reuses that work. The mock engine cannot decode video, so in the lab each
video is replaced by a prefix of `length` tokens that only that video's requests share: the mock
engine's prefix cache then plays the part of the worker's video cache.

The prefix is built from a fixed vocabulary of made-up words that the lab's tiny tokenizer
(`lab/tiny_model.py`) learns as one token each, so a prefix of N words is N tokens. Pure standard
library: the tokenizer build (`lab/tiny_model.py`) imports it with the Dynamo venv's Python.
"""

from __future__ import annotations

import functools
import itertools
import random

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
VOCABULARY_SIZE = 1024


@functools.cache
def vocabulary() -> tuple[str, ...]:
    """The stand-in words, e.g. 'baba', 'babe', ...: two consonant-vowel syllables each."""
    syllables = [c + v for c, v in itertools.product(_CONSONANTS, _VOWELS)]
    words = (a + b for a, b in itertools.product(syllables, repeat=2))
    return tuple(itertools.islice(words, VOCABULARY_SIZE))


def video_prefix(video_id: str, length: int) -> str:
    """`length` words that stand for one video; the same id always gives the same words.

    The words are drawn from a generator seeded by the id (string seeds are hashed with SHA-512,
    so the text is the same on every machine and Python version); two videos differ from their
    first words on, so they never share a cached block.
    """
    if length < 1:
        raise ValueError(f"a video prefix needs at least one token, got {length}")
    words = vocabulary()
    rng = random.Random(f"video-prefix:{video_id}")
    return " ".join(rng.choice(words) for _ in range(length))


class VideoStandIn:
    """The lab's `VideoMedia`: a video is a text prefix only that video's requests share, then
    the question; nothing to make or serve."""

    video_files = False

    def __init__(self, prefix_tokens: int) -> None:
        self.prefix_tokens = prefix_tokens
        self._last: tuple[str, str] = ("", "")  # a video's questions come one after another

    def request_fields(self, video_id: str, question: str) -> dict[str, object]:
        if self._last[0] != video_id:
            self._last = (video_id, video_prefix(video_id, self.prefix_tokens))
        return {"text": f"{self._last[1]}\n\n{question}"}
