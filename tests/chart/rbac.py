"""The RBAC authorizer over rendered objects, so a test can hold the
requests a binary made (as testkit's fake API logs them) against the
chart's Roles and bindings."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator


@dataclasses.dataclass(frozen=True)
class Request:
    """A resource request as the RBAC authorizer sees it."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None


class Rbac:
    """The RBAC authorizer over rendered objects, for one ServiceAccount:
    RoleBindings grant their Role (or ClusterRole) in their namespace only,
    ClusterRoleBindings everywhere; a rule with resourceNames matches only
    requests naming one of them, so never a create or a list."""

    def __init__(self, objects: list[dict[str, Any]], namespace: str, name: str) -> None:
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
                 for o in objects if o["kind"] in ("Role", "ClusterRole")}
        # (where the grant applies: a namespace, or None for everywhere; the role)
        self.grants: list[tuple[str | None, dict[str, Any]]] = []
        for b in objects:
            if b["kind"] not in ("RoleBinding", "ClusterRoleBinding") or subject not in b.get("subjects", []):
                continue
            where = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
            ref = b["roleRef"]
            role_ns = where if ref["kind"] == "Role" else None
            self.grants.append((where, roles[(ref["kind"], role_ns, ref["name"])]))

    def rules(self) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
        """(where it applies, "Kind namespace/name" of its role, rule)."""
        for where, role in self.grants:
            for rule in role["rules"]:
                yield where, f"{role['kind']} {role['metadata'].get('namespace') or ''}/{role['metadata']['name']}", rule

    def cells(self) -> set[tuple[str, str, str, str, str | None]]:
        """Everything granted, one permission at a time: (role, verb, group,
        resource, resource name or None for any)."""
        return {
            (role, verb, group, resource, name)
            for _, role, rule in self.rules()
            for verb in rule["verbs"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for name in rule.get("resourceNames") or [None]
        }

    def allowing(self, r: Request) -> set[tuple[str, str, str, str, str | None]]:
        """The granted cells that allow `r` (empty: RBAC forbids it)."""
        out = set()
        for where, role, rule in self.rules():
            if where is not None and r.namespace != where:
                continue
            if r.verb in rule["verbs"] and r.group in rule["apiGroups"] and r.resource in rule["resources"]:
                names = rule.get("resourceNames")
                if not names:
                    out.add((role, r.verb, r.group, r.resource, None))
                elif r.name is not None and r.name in names:
                    out.add((role, r.verb, r.group, r.resource, r.name))
        return out
