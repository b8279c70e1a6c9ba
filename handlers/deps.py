"""Request dependencies."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from handlers.auth import Authenticator, AuthUser, InvalidToken
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


ServicesDep = Annotated[Services, Depends(get_services)]
CurrentUser = Annotated[AuthUser, Depends(get_current_user)]
