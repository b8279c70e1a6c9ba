"""Request dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from handlers.auth import Authenticator, AuthUser, InvalidToken
from handlers.errors import ApiError
from infra.runtime import Services

_bearer = HTTPBearer(auto_error=False)


# async: FastAPI runs a plain `def` dependency on its thread pool, a hop every request pays.
async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> AuthUser:
    if credentials is None:
        raise InvalidToken
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.verify(credentials.credentials)


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


ServicesDep = Annotated[Services, Depends(get_services)]
CurrentUser = Annotated[AuthUser, Depends(get_current_user)]
