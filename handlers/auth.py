"""Supabase access tokens: HS256 with the project's JWT secret, or asymmetric keys from JWKS."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

import jwt

from infra.settings import Settings
from infra.store.access import Claims
from infra.store.ids import UserId

logger = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS = ["RS256", "ES256", "EdDSA"]
LEEWAY_SECONDS = 5
# A token verified once is taken again, unchanged, for this long at most and never past its
# expiry: its signature, audience and claims verify the same way every time, and a request's
# check of them took about 0.3 ms before its first statement. A key withdrawn from the JWKS is
# refused this much later at most (the JWKS client itself keeps keys for 5 minutes).
REVERIFY_S = 60.0
VERIFIED_MAX = 1024  # tokens held; the least recently used go first


class InvalidToken(Exception):
    """The bearer token is missing, malformed, expired, mis-signed or for another audience."""


@dataclass(frozen=True)
class AuthUser:
    id: UserId
    claims: Claims


class Authenticator:
    def __init__(self, settings: Settings) -> None:
        secret = settings.supabase_jwt_secret
        self._secret = secret.get_secret_value() if secret else None
        self._audience = settings.jwt_audience
        self._jwks = (
            jwt.PyJWKClient(f"{settings.supabase_url.rstrip('/')}/auth/v1/.well-known/jwks.json")
            if settings.supabase_url
            else None
        )
        # By the token's digest: what it verified as, and until when that holds.
        self._verified: OrderedDict[bytes, tuple[AuthUser, float]] = OrderedDict()

    async def verify(self, token: str) -> AuthUser:
        key = hashlib.sha256(token.encode()).digest()
        held = self._verified.get(key)
        now = time.time()
        if held is not None and now < held[1]:
            self._verified.move_to_end(key)
            return held[0]
        user = await self._verified_now(token)
        # PyJWT refuses a token once exp <= now - leeway.
        self._verified[key] = (
            user,
            min(now + REVERIFY_S, int(user.claims["exp"]) + LEEWAY_SECONDS),
        )
        self._verified.move_to_end(key)
        while len(self._verified) > VERIFIED_MAX:
            self._verified.popitem(last=False)
        return user

    async def _verified_now(self, token: str) -> AuthUser:
        try:
            header = jwt.get_unverified_header(token)
            key, algorithms = await self._key_for(token, str(header.get("alg", "")))
            decoded: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=self._audience,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "sub", "aud"]},
            )
            user_id = UUID(str(decoded["sub"]))
        except (jwt.PyJWTError, ValueError, KeyError) as exc:
            logger.info("rejected token", extra={"reason": type(exc).__name__})
            raise InvalidToken from exc
        # Postgres reads `sub` itself (auth.uid()): only the canonical form it can cast is a
        # user, not the other spellings Python's UUID accepts (urn:uuid:…, braces, no dashes).
        if decoded.get("role") != "authenticated" or str(user_id) != decoded["sub"]:
            raise InvalidToken
        # Checked above: `sub` and `role` are the strings Claims names; the rest go on as they are.
        return AuthUser(id=UserId(user_id), claims=cast(Claims, decoded))

    async def _key_for(self, token: str, alg: str) -> tuple[Any, list[str]]:
        if alg == "HS256" and self._secret:
            return self._secret, ["HS256"]
        if alg in ASYMMETRIC_ALGORITHMS and self._jwks is not None:
            # PyJWKClient fetches over blocking HTTP on a cache miss; keep it off the loop.
            signing_key = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
            return signing_key.key, [alg]
        raise InvalidToken
