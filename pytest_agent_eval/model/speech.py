"""How the scripted stand-in's decisions are spoken in an agent's own tools: the protocol each agent's folder fills
(``agents/<name>/stand_in.py``), and what every such translation shares.

The policy (:mod:`.scripted`) decides in the house's common tool vocabulary (``Read``, ``Grep``, ``Bash``,
``mcp__NAME__tool``, ``Task``), which is Claude Code's own, so a Claude Code request is answered as decided. Any other
agent's request is read into that vocabulary and the decision rendered back in its tools and API by the
:class:`Speech` its agent object offers (:meth:`~pytest_agent_eval.agents.base.CodingAgent.speech`): the model server
routes a request by the API it came on and the speech that claims it (:func:`speech_for`), never by naming an agent.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .scripted import Step, Turn
    from .sse import Reply

# Directories a file search skips: version control, the retrieval tool's index, dependencies.
_SKIPPED_DIRS = (".git", ".codegraph", "node_modules")


class Speech(Protocol):
    """One agent's tools, as the stand-in speaks them: ``api`` the model API its requests come on (``messages``,
    ``responses``, ``gemini``); :meth:`speaks` whether a request of that API is in its tools; :meth:`read_turn` the
    request as the policy sees it; :meth:`render` the policy's reply as the API's answer in its tools (a Messages
    :class:`~.sse.Reply`, the Responses API's output items, the Gemini API's parts)."""

    api: str

    def speaks(self, request: dict[str, Any]) -> bool: ...

    def read_turn(self, request: dict[str, Any], explore: str | None) -> Turn: ...

    def render(self, request: dict[str, Any], reply: Reply, explore: str | None) -> Any: ...


@dataclass(frozen=True)
class ApiSpeech:
    """A :class:`Speech` that claims every request of its API (the one agent on it speaks its tools there): its
    ``read`` reads a request into a turn, its ``write`` renders a reply in the API's answer."""

    api: str
    read: Callable[[dict[str, Any]], Turn]
    write: Callable[[dict[str, Any], Reply], Any]

    def speaks(self, request: dict[str, Any]) -> bool:
        return True

    def read_turn(self, request: dict[str, Any], explore: str | None = None) -> Turn:
        return self.read(request)

    def render(self, request: dict[str, Any], reply: Reply, explore: str | None = None) -> Any:
        return self.write(request, reply)


_PROVIDERS: list[Callable[[], Iterable[Speech]]] = []


def provide(speeches: Callable[[], Iterable[Speech]]) -> None:
    """Say where speeches come from: the agents' package gives its built-in agents' when it is imported, so that the
    model, below the agents, names none of them (docs/architecture.md)."""
    if speeches not in _PROVIDERS:
        _PROVIDERS.append(speeches)


def known_speeches() -> tuple[Speech, ...]:
    """Every speech the providers give (an agent whose tools are the common vocabulary gives none)."""
    return tuple(speech for provider in _PROVIDERS for speech in provider())


def speech_for(api: str, request: dict[str, Any], speeches: tuple[Speech, ...]) -> Speech | None:
    """The speech of ``api`` that claims ``request``; None when none does (a Messages request in the common
    vocabulary: Claude Code's)."""
    return next((speech for speech in speeches if speech.api == api and speech.speaks(request)), None)


def shell_step(command: str) -> Step:
    """A shell command as the step it is in the common vocabulary: a Read of one file, a Grep, or a Bash call."""
    from ..transcript.file_access import bash_access  # here: the agents' package imports this module's registry
    from .scripted import Step

    access = bash_access(command)
    if access is not None and access.kind == "read" and access.path:
        return Step("Read", {"file_path": access.path})
    if access is not None and access.kind == "search":
        return Step("Grep", {"command": command})
    return Step("Bash", {"command": command})


def grep_command(pattern: str) -> str:
    """The shell command a Grep of the policy is run as: the names of the files matching ``pattern``."""
    skipped = " ".join(f"--exclude-dir={d}" for d in _SKIPPED_DIRS)
    return f"grep -rliE {shlex.quote(pattern)} {skipped} ."
