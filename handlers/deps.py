"""Request dependencies: what a route takes, as `Annotated` aliases.

The app's shared objects are set on `app.state` by `provide` and read back here alone, so a
route names what it needs in its signature (`services: ServicesDep`) and never reaches into the
app itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agent.assistants import Assistant, Assistants
from handlers.auth import Authenticator, AuthUser, InvalidToken
from handlers.errors import ApiError
from handlers.fields import AssistantQuery
from infra.events import EventSender
from infra.runtime import Services
from turns.streaming import TurnHost, TurnTasks

_bearer = HTTPBearer(auto_error=False)


def provide(
    app: FastAPI,
    *,
    services: Services,
    authenticator: Authenticator,
    events: EventSender,
    assistants: Assistants,
    turns: TurnTasks,
) -> None:
    """Hand the app's shared objects to the dependencies below."""
    app.state.services = services
    app.state.authenticator = authenticator
    app.state.events = events
    app.state.assistants = assistants
    app.state.turns = turns


# async: FastAPI runs a plain `def` dependency on its thread pool, a hop every request pays.
async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_events(request: Request) -> EventSender:
    """The Inngest client the routes send their events with."""
    events: EventSender = request.app.state.events
    return events


async def get_assistants(request: Request) -> Assistants:
    """The deployment's assistants, loaded and checked once, when the app was made."""
    assistants: Assistants = request.app.state.assistants
    return assistants


async def get_turns(request: Request) -> TurnTasks:
    """The turns running detached from their response, which the app's shutdown waits for."""
    turns: TurnTasks = request.app.state.turns
    return turns


ServicesDep = Annotated[Services, Depends(get_services)]
EventsDep = Annotated[EventSender, Depends(get_events)]
AssistantsDep = Annotated[Assistants, Depends(get_assistants)]
TurnsDep = Annotated[TurnTasks, Depends(get_turns)]


async def get_turn_host(request: Request) -> TurnHost:
    """What a route that starts a turn lends it. Read here at once, not through the four
    dependencies above: FastAPI resolves each dependency anew on every request, in the time
    before a turn's first statement."""
    state = request.app.state
    return TurnHost(
        services=state.services, events=state.events, assistants=state.assistants, turns=state.turns
    )


async def get_queried_assistant(
    assistants: AssistantsDep, assistant_id: AssistantQuery = None
) -> Assistant:
    """The assistant the query's `assistantId` names (UnknownAssistant: 404), the default one
    when it names none."""
    return assistants.pick(assistant_id)


async def get_current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> AuthUser:
    if credentials is None:
        raise InvalidToken
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.verify(credentials.credentials)


TurnHostDep = Annotated[TurnHost, Depends(get_turn_host)]
CurrentUser = Annotated[AuthUser, Depends(get_current_user)]
QueriedAssistant = Annotated[Assistant, Depends(get_queried_assistant)]


def strict_router() -> APIRouter:
    """A module's router of the app's routes: each refuses query parameters it does not take."""
    return APIRouter(dependencies=[Depends(known_query_only)])


async def known_query_only(request: Request) -> None:
    """422 for a query parameter the route does not take, as a body with an unknown field gets:
    a misspelt option must not be silently ignored."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    unknown = sorted(set(request.query_params) - _query_names(route.dependant))
    if unknown:
        raise ApiError(422, "invalid_request", f"unknown query parameter {unknown[0]!r}")


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for dependency in dependant.dependencies:
        names |= _query_names(dependency)
    return names
