"""Synthetic test videos: the recipe's 30 s, 2 FPS clips, H.264 in MP4.

H.264 because the workers decode video with NVDEC, which takes H.264/H.265 only. The FFmpeg binary
comes from the `imageio-ffmpeg` wheel (it includes libx264), so no system package is needed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import imageio_ffmpeg  # type: ignore[import-untyped]

DURATION_SECONDS = 30
FRAMES_PER_SECOND = 2
SIZE = "640x360"


def ffmpeg_args(out: Path, pattern: str = "testsrc") -> list[str]:
    """Arguments after the ffmpeg executable; `pattern` is an FFmpeg test source (testsrc, ...)."""
    source = f"{pattern}=duration={DURATION_SECONDS}:size={SIZE}:rate={FRAMES_PER_SECOND}"
    return [
        "-hide_banner", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", source,
        "-c:v", "libx264", "-pix_fmt", "yuv420p",
        str(out),
    ]  # fmt: skip


def make_video(out: Path, pattern: str = "testsrc") -> Path:
    """Write one synthetic video; raises RuntimeError with FFmpeg's message if it fails."""
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [imageio_ffmpeg.get_ffmpeg_exe(), *ffmpeg_args(out, pattern)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"ffmpeg could not write {out}: {result.stderr.strip()}")
    return out
