"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: commands on
the browser's fd 3, answers on its fd 4, each a JSON message ended by a NUL byte), so a test can press real
keys (``Input.dispatchKeyEvent``: trusted events, as from a keyboard) and read what the page shows. No
library beyond the standard one: the protocol is plain JSON."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import time
from typing import Any

# key -> (code, Windows virtual key code, text the key types)
KEYS = {
    "Tab": ("Tab", 9, ""),
    "Enter": ("Enter", 13, "\r"),
    " ": ("Space", 32, " "),
    "ArrowDown": ("ArrowDown", 40, ""),
    "ArrowUp": ("ArrowUp", 38, ""),
    "Home": ("Home", 36, ""),
    "End": ("End", 35, ""),
}
SHIFT = 8  # the protocol's modifier bit for Shift


def _above_4(fd: int) -> int:
    """``fd`` moved to a number above 4 (close-on-exec, as ``os.pipe`` makes it)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class DevToolsError(RuntimeError):
    """The browser answered a command with an error, closed the pipe, or did not answer in time."""


class Browser:
    """One headless Chromium with one page, ``width`` x ``height`` CSS px; use as a context manager."""

    def __init__(self, chromium: str, width: int, height: int = 900, timeout: float = 60.0) -> None:
        self.timeout = timeout
        # both ends held above fd 4, so wiring fd 3 cannot overwrite the end fd 4 is taken from
        to_browser, self._send = map(_above_4, os.pipe())
        self._receive, from_browser = map(_above_4, os.pipe())

        def wire() -> None:  # in the child: fd 3 reads our commands, fd 4 writes its answers (inheritable)
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        command += ["--remote-debugging-pipe", f"--window-size={width},{height}", "about:blank"]
        self._process = subprocess.Popen(
            command, preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.session = ""
        try:
            page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
            self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
            self.call("Page.enable")
        except BaseException:  # no browser left running behind a failed start
            self.__exit__()
            raise

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.kill()
        self._process.wait(timeout=30)
        os.close(self._send)
        os.close(self._receive)

    def _message(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._receive], [], [], left)[0]:
                raise DevToolsError(f"no answer from chromium within {self.timeout} s")
            chunk = os.read(self._receive, 1 << 16)
            if not chunk:
                raise DevToolsError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and return its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        try:
            os.write(self._send, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise DevToolsError(f"{method}: chromium closed the pipe (exit code {self._process.poll()})") from None
        while True:
            answer = self._message()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise DevToolsError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_for(self, event: str) -> dict[str, Any]:
        """The next (or an already received) ``event``'s parameters."""
        while True:
            for i, message in enumerate(self._events):
                if message.get("method") == event:
                    return self._events.pop(i).get("params", {})
            self._events.append(self._message())

    def open(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        self._events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def press(self, key: str, shift: bool = False) -> None:
        """Press and release ``key`` (a name of ``KEYS``) as a keyboard would."""
        code, virtual, text = KEYS[key]
        common = {"key": key, "code": code, "windowsVirtualKeyCode": virtual, "modifiers": SHIFT if shift else 0}
        self.call("Input.dispatchKeyEvent", type="keyDown" if text else "rawKeyDown", text=text, **common)
        self.call("Input.dispatchKeyEvent", type="keyUp", **common)

    def type(self, text: str) -> None:
        """Type ``text`` into the focused field as a keyboard's input method would (``input`` events)."""
        self.call("Input.insertText", text=text)

    def until(self, expression: str, timeout: float = 30.0) -> Any:
        """The first truthy value of ``expression``, read every 20 ms (a page that loads its data after the
        load event: the explorer's paged files)."""
        deadline = time.monotonic() + timeout
        while not (value := self.read(expression)):
            if time.monotonic() > deadline:
                raise DevToolsError(f"{expression}: still false after {timeout} s")
            time.sleep(0.02)
        return value

    def read(self, expression: str) -> Any:
        """The JSON value of ``expression`` evaluated in the page (reading only: the test drives with keys)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")
