"""Synthetic test videos: the recipe's 30 s, 2 FPS clips, H.264 in MP4.

H.264 because the workers decode video with NVDEC, which takes H.264/H.265 only. The pod programs
run FFmpeg from the `imageio-ffmpeg` wheel (it includes libx264), so no system package is needed.
"""

from __future__ import annotations

from pathlib import Path

DURATION_SECONDS = 30
FRAMES_PER_SECOND = 2
WIDTH, HEIGHT = 640, 360
SIZE = f"{WIDTH}x{HEIGHT}"


def ffmpeg_args(out: Path, pattern: str = "testsrc") -> list[str]:
    """Arguments after the ffmpeg executable; `pattern` is an FFmpeg test source (testsrc, ...)."""
    source = f"{pattern}=duration={DURATION_SECONDS}:size={SIZE}:rate={FRAMES_PER_SECOND}"
    # Laid out by hand (formatter skipped): a command line, each option beside its value.
    return [
        "-hide_banner", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", source,
        "-c:v", "libx264", "-pix_fmt", "yuv420p",
        str(out),
    ]  # fmt: skip


_PALETTE = ("red", "yellow", "cyan", "magenta", "white", "black", "orange", "lime")
_BOX = 64
_BOX_STEP = 8
_COLUMNS = (WIDTH - _BOX) // _BOX_STEP + 1
DISTINCT_VIDEOS = _COLUMNS * ((HEIGHT - _BOX) // _BOX_STEP + 1)
"""How many distinct videos `distinct_video_args` makes: one per position of its box."""


def distinct_video_args(out: str, index: int) -> list[str]:
    """FFmpeg arguments for the sweep's `index`-th video: the stage's test pattern plus a box
    whose position (and colour) is unique to the index.

    Every video id must have different pixels: a worker's multimodal cache keys on the media's
    content, so two ids with identical frames would make a "new" video a cache hit.
    """
    if not 0 <= index < DISTINCT_VIDEOS:
        raise ValueError(f"at most {DISTINCT_VIDEOS} distinct synthetic videos, asked for #{index}")
    x, y = _BOX_STEP * (index % _COLUMNS), _BOX_STEP * (index // _COLUMNS)
    colour = _PALETTE[index % len(_PALETTE)]
    box = f"drawbox=x={x}:y={y}:w={_BOX}:h={_BOX}:color={colour}@1:t=fill"
    args = ffmpeg_args(Path(out))
    codec = args.index("-c:v")
    return [*args[:codec], "-vf", box, *args[codec:]]
