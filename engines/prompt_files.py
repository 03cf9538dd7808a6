"""Reading a prompt file safely: it is named by a settings file that may come with a downloaded project.

A prompt file must be a regular file (a FIFO would block the reader forever, `/dev/zero` never ends), is read
only up to its size limit (never whole first), and, when a settings file names it by a relative path, must
stay inside that file's folder (`../../.ssh/id_rsa` is refused) unless the user allows prompts outside it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class PromptFileError(ValueError):
    """A prompt file that cannot be used; the message names the file and why."""


def read_prompt_file(file: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file `file`, refused past `max_bytes` without reading further."""
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; its type is refused below
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise PromptFileError(f"{file}: prompt file not found") from None
    except OSError as exc:
        raise PromptFileError(f"{file}: cannot read the prompt file ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise PromptFileError(f"{file}: not a regular file (a prompt is a text file)")
        try:
            raw = handle.read(max_bytes + 1)
        except OSError as exc:
            raise PromptFileError(f"{file}: cannot read the prompt file ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise PromptFileError(f"{file}: over {max_bytes:,} bytes; a prompt file is shorter")
    return raw


def inside(root: Path, relative: str, *, allow_outside: bool = False) -> Path:
    """`relative` (as a settings file wrote it) under `root`, refused when it leads outside `root` (after
    following links) unless `allow_outside`."""
    file = root / Path(relative).expanduser()
    if allow_outside:
        return file
    real_root = root.resolve()
    if not file.resolve().is_relative_to(real_root):
        raise PromptFileError(f"{file}: outside the folder of the settings that name it ({real_root}); "
                              "a prompt of a project stays in the project (--allow-prompt-outside allows it)")
    return file
