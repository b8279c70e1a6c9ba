"""Tokens as Realtime checks them: signed by the project (its JWT secret, or a key of its JWKS),
not expired, with `role` and `exp` claims. Unlike the API, any role (`anon` keys too) and any
audience are accepted: the role decides what RLS lets the subscriber see."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import jwt

from infra.settings import Settings

ASYMMETRIC_ALGORITHMS = ["RS256", "ES256", "EdDSA"]


class TokenRefused(Exception):
    """Realtime's reason: `code` is its error code, `message` what a client is told."""

    def __init__(self, code: str, message: str, http_message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.http_message = http_message  # the handshake's 401 body

    @property
    def reason(self) -> str:
        """A channel's join error or shutdown message, as Realtime words it."""
        return f"{self.code}: {self.message}"


MALFORMED = ("MalformedJWT", "The token provided is not a valid JWT")
BAD_SIGNATURE = ("JwtSignatureError", "Failed to validate JWT signature")
MISSING_CLAIMS = ("InvalidJWTToken", "Fields `role` and `exp` are required in JWT")


@dataclass(frozen=True)
class Verified:
    claims: dict[str, Any]

    @property
    def role(self) -> str:
        return str(self.claims["role"])

    @property
    def expires_in_s(self) -> float:
        return float(self.claims["exp"]) - time.time()


class RealtimeTokens:
    def __init__(self, settings: Settings) -> None:
        secret = settings.supabase_jwt_secret
        self._secret = secret.get_secret_value() if secret else None
        self._jwks = (
            jwt.PyJWKClient(f"{settings.supabase_url.rstrip('/')}/auth/v1/.well-known/jwks.json")
            if settings.supabase_url
            else None
        )

    async def verify(self, token: object) -> Verified:
        """The token's claims; TokenRefused with Realtime's words for why not."""
        if not isinstance(token, str) or not token:
            raise TokenRefused("MissingAPIKey", "API key is missing", "API key is missing")
        token = "".join(token.split())
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused(*MALFORMED, MALFORMED[1]) from None
        key, algorithms = await self._key_for(token, str(header.get("alg", "")))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                options={"verify_aud": False, "verify_exp": False, "require": []},
            )
        except jwt.InvalidSignatureError:
            raise TokenRefused(*BAD_SIGNATURE, BAD_SIGNATURE[1]) from None
        except jwt.PyJWTError:
            raise TokenRefused(*MALFORMED, MALFORMED[1]) from None
        if not isinstance(claims.get("role"), str) or not isinstance(
            claims.get("exp"), int | float
        ):
            raise TokenRefused(*MISSING_CLAIMS, MISSING_CLAIMS[1])
        expired_for = int(time.time()) - int(claims["exp"])
        if expired_for >= 0:
            message = f"Token has expired {expired_for} seconds ago"
            raise TokenRefused("InvalidJWTToken", message, "Token has expired")
        return Verified(claims)

    async def _key_for(self, token: str, alg: str) -> tuple[Any, list[str]]:
        if alg == "HS256" and self._secret:
            return self._secret, ["HS256"]
        if alg in ASYMMETRIC_ALGORITHMS and self._jwks is not None:
            try:
                # PyJWKClient fetches over blocking HTTP on a cache miss; keep it off the loop.
                signing_key = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
            except jwt.PyJWTError:
                raise TokenRefused(*BAD_SIGNATURE, BAD_SIGNATURE[1]) from None
            return signing_key.key, [alg]
        message = "Failed to generate JWT signer, check your JWT secret or JWKS configuration"
        raise TokenRefused("JwtSignerError", message, message)
