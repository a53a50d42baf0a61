"""SCRAM principals of their own on the local secured broker, with the ACLs a test grants them.

The broker runs the StandardAuthorizer; ACLs are granted through the plaintext
listener, whose principal is a super user there.
"""
from __future__ import annotations

import uuid

from confluent_kafka.admin import (
    AclBindingFilter,
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

import config
from app import acls
from app import app as pipeline_app

TABLES = sorted(table.name for table in pipeline_app.tables.values())


class Principal:
    """A SCRAM user of its own, with the ACLs granted to it."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin
        self.name, self.password = f"acl-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        upsert = UserScramCredentialUpsertion(self.name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              self.password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result()

    @property
    def user(self) -> str:
        return f"User:{self.name}"

    def env(self) -> dict[str, str]:
        return {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_USERNAME": self.name,
                "KAFKA_SASL_PASSWORD": self.password}

    def grant(self, permissions: list[acls.Permission]) -> None:
        for future in self.admin.create_acls([p.binding(self.user) for p in permissions]).values():
            future.result()

    def revoke(self, permission: acls.Permission) -> None:
        binding = permission.binding(self.user)
        matching = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                                    binding.host, binding.operation, binding.permission_type)
        for future in self.admin.delete_acls([matching]).values():
            assert future.result(), f"no ACL {permission} to revoke"


def settings_of(name: str, principal: Principal) -> config.Settings:
    return config.load(config.child_env(TOPIC_PREFIX=f"{name}-", APP_ID=f"faust-eos-{name}", **principal.env()))


def changelogs(settings: config.Settings) -> list[str]:
    return [f"{settings.app_id}-{table}-changelog" for table in TABLES]


def lacking(settings: config.Settings) -> list[str]:
    return acls.missing(settings, AdminClient(settings.kafka_client(log_level=2)), changelogs(settings))


def as_super_user(env: dict[str, str]) -> config.Settings:
    """The settings of ``env`` without the principal's security settings: the plaintext super user."""
    return config.load({k: v for k, v in env.items() if not k.startswith(("KAFKA_SECURITY", "KAFKA_SASL"))})
