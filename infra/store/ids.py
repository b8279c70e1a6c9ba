"""The ids that cross the store's boundary."""

from __future__ import annotations

from typing import NewType
from uuid import UUID

UserId = NewType("UserId", UUID)
ChatId = NewType("ChatId", UUID)
MessageId = NewType("MessageId", UUID)
