"""Recording a mission's model exchanges as a script `load_script` can replay."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from loopwright.agent.replies import ModelReply, reply_to_step
from loopwright.config import Tier


class Recorder:
    """Appends each completed exchange to a JSON recording that `load_script` can replay.

    The file is rewritten atomically after every exchange, so a crash keeps what was recorded.
    """

    def __init__(self, path: Path, mission: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.mission = mission
        """The fingerprint of the recorded mission, checked when the recording is replayed."""
        self._exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def exchanges(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._exchanges)

    def record(self, tier: Tier, reply: ModelReply) -> None:
        exchange = {"tier": tier.name, "model": reply.model, "response": reply_to_step(reply)}
        with self._lock:
            self._exchanges.append(exchange)
            document: dict[str, Any] = {"version": 1}
            if self.mission is not None:
                document["mission"] = self.mission
            document["exchanges"] = self._exchanges
            self._write(document)

    def _write(self, document: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(document, out, indent=2, ensure_ascii=False)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
