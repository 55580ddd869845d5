"""The generated CRDs and RBAC against the real apiserver.

The CRDs install and become Established; a ResourceFlavor, ClusterQueue, LocalQueue and Workload can be
created through them and read back into our views; fields we do not model survive (no pruning), the defaults
Kueue applies are applied, Workload status is only writable through the status subresource, v1beta2 Workloads are
selectable by their ClusterQueue, v1beta1 is served;
and the ClusterRole allows what the connector does and nothing much more.
"""

from __future__ import annotations

import secrets

import msgspec
import pytest
from fixtures import fastyaml
from kubehelp import (
    KUEUE,
    cluster_queue,
    connect,
    create,
    eventually,
    flavor,
    get,
    lax_crd,
    local_queue,
    namespace,
    schema_takes,
)
from kubernetes_asyncio import client, config, utils

from connectors.k8s import crds
from connectors.k8s import manifests as m
from connectors.k8s.errors import Invalid
from connectors.k8s.resources import BY_KIND, KUEUE_RESOURCES, Resource
from connectors.k8s.user_roles import user_roles
from events import objects as o
from events import tas_assignment as tas
from events.errors import SchemaRefused
from events.manifests import decode_object
from kueue_es.commands.manifests import documents, render

pytestmark = pytest.mark.kube
INT32_MAX = 2**31 - 1


@pytest.mark.asyncio
async def test_crds_install_and_serve_the_kueue_kinds(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        names = await crds.install(kc)
        assert sorted(names) == sorted(f"{r.plural}.kueue.x-k8s.io" for r in KUEUE_RESOURCES)
        # idempotent: a second install updates in place
        assert await crds.install(kc) == names

        crd = msgspec.json.decode(await kc.get(crds.CRD_RESOURCE, "workloads.kueue.x-k8s.io"))
        assert crd["spec"]["names"]["shortNames"] == ["kwl", "kueueworkload"]
        assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
            ("v1beta2", True, True), ("v1beta1", True, False)]
        assert crd["status"]["acceptedNames"]["kind"] == "Workload"

        sfx = secrets.token_hex(3)
        ns = await namespace(kc, "crds")
        await create(kc, flavor(f"default-{sfx}", {"instance-type": "on-demand"}))
        await create(kc, cluster_queue(f"cq-{sfx}", {f"default-{sfx}": {"cpu": 4, "memory": "8Gi"}}))
        await create(kc, local_queue(ns, "user-queue", f"cq-{sfx}"))
        wl = await create(kc, {
            "apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "wl-1", "namespace": ns},
            "spec": {"queueName": "user-queue", "podSets": [{
                "count": 2,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox:1.36", "command": ["true"],
                    "resources": {"requests": {"cpu": "500m"}}}]}}}]},
            # status on create is dropped: it has its own subresource
            "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "X", "message": "",
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
        })
        assert "status" not in wl or not wl["status"].get("conditions")
        # Kueue's defaults are applied, unmodelled fields are kept
        assert wl["spec"]["active"] is True
        assert wl["spec"]["podSets"][0]["name"] == "main"
        assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
        cq = await get(kc, "ClusterQueue", f"cq-{sfx}")
        assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
        assert cq["spec"]["stopPolicy"] == "None"
        assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}

        # decoded by the views the watcher uses
        view = msgspec.json.decode(await kc.get(BY_KIND["Workload"], "wl-1", ns), type=o.Workload)
        assert view.spec.queue_name == "user-queue" and view.spec.pod_sets[0].count == 2
        assert msgspec.json.decode(await kc.get(BY_KIND["ClusterQueue"], f"cq-{sfx}"), type=o.ClusterQueue) \
            .spec.resource_groups[0].flavors[0].resources[1].nominal_quota == "8Gi"
        lq = msgspec.json.decode(await kc.get(BY_KIND["LocalQueue"], "user-queue", ns), type=o.LocalQueue)
        assert lq.spec.cluster_queue == f"cq-{sfx}"

        # the status subresource takes status
        rv = wl["metadata"]["resourceVersion"]
        patched = msgspec.json.decode(await kc.patch(BY_KIND["Workload"], "wl-1", {
            "metadata": {"resourceVersion": rv},
            "status": {"admission": {"clusterQueue": f"cq-{sfx}", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": f"default-{sfx}"}, "resourceUsage": {"cpu": 1}, "count": 2}]},
                "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                "message": "m", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}},
            ns, subresource="status"))
        assert patched["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": 1}
        # the v1beta2 Workload is selectable by the ClusterQueue holding its quota (Kueue #11568), v1beta1 is not
        await create(kc, {**wl, "metadata": {"name": "wl-2", "namespace": ns}})
        v1b1 = Resource("Workload", "kueue.x-k8s.io", "v1beta1", "workloads", True)
        for selector, names in ((f"status.admission.clusterQueue=cq-{sfx}", ["wl-1"]),
                                ("status.admission.clusterQueue=other", []), ("status.admission.clusterQueue=", ["wl-2"])):
            listed = await kc.list(BY_KIND["Workload"], field_selector=selector, namespace=ns)
            assert sorted(msgspec.json.decode(i)["metadata"]["name"] for i in listed.items) == names, selector
        with pytest.raises(Invalid, match="field label not supported"):
            await kc.list(v1b1, field_selector=f"status.admission.clusterQueue=cq-{sfx}", namespace=ns)
        for kind in ("ClusterQueue", "LocalQueue"):
            r = BY_KIND[kind]
            name = f"cq-{sfx}" if kind == "ClusterQueue" else "user-queue"
            body = {"status": {"pendingWorkloads": 3, "conditions": []}}
            out = msgspec.json.decode(await kc.patch(r, name, body, ns if r.namespaced else "", subresource="status"))
            assert out["status"]["pendingWorkloads"] == 3

        # types are checked for the fields we model
        with pytest.raises(Invalid):
            await create(kc, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "bad", "namespace": ns},
                              "spec": {"queueName": "user-queue", "podSets": [{"count": "two"}]}})

        # v1beta1 is served (no conversion: the same stored object)
        old = msgspec.json.decode(await kc.get(v1b1, "wl-1", ns))
        assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
        assert old["spec"]["queueName"] == "user-queue"


def _tas_workload(ns: str, name: str, api_version: str = KUEUE) -> dict:
    return {"apiVersion": api_version, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "q", "podSets": [{"count": 3, "template": {"spec": {"containers": [
                {"name": "main", "image": "busybox:1.36"}]}}}]}}


@pytest.mark.asyncio
async def test_workload_status_takes_kueues_topology_assignment_in_each_version(kube_apiserver) -> None:
    domains = [o.TopologyDomainAssignment(values=[f"pool-a-node-{i}"], count=1 + i % 2) for i in range(3)]
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "tas-status")
        wl = BY_KIND["Workload"]

        # v1beta2: typed slices, delayedTopologyRequest and unhealthyNodes, read back into our views
        await create(kc, _tas_workload(ns, "v2"))
        assignment = msgspec.to_builtins(tas.encode([tas.HOSTNAME_LEVEL], domains))
        psa = {"name": "main", "count": 3, "delayedTopologyRequest": "Ready", "topologyAssignment": assignment}
        await kc.patch(wl, "v2", {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [psa]},
                                             "unhealthyNodes": [{"name": "pool-a-node-1"}]}}, ns, subresource="status")
        got = msgspec.json.decode(await kc.get(wl, "v2", ns), type=o.Workload)
        (got_psa,) = got.status.admission.pod_set_assignments
        assert got_psa.delayed_topology_request == "Ready"
        assert tas.decode(got_psa.topology_assignment) == domains
        assert got.status.unhealthy_nodes == [o.UnhealthyNode(name="pool-a-node-1")]
        bad = {**psa, "topologyAssignment": {**assignment, "slices": [{**assignment["slices"][0], "domainCount": "3"}]}}
        with pytest.raises(Invalid):
            await kc.patch(wl, "v2", {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [bad]}}},
                           ns, subresource="status")

        # v1beta1: the domains form, typed by the v1beta1 schema
        v1b1 = Resource("Workload", "kueue.x-k8s.io", "v1beta1", "workloads", True)
        await kc.create(v1b1, _tas_workload(ns, "v1", "kueue.x-k8s.io/v1beta1"), ns)
        v1_assignment = msgspec.to_builtins(o.TopologyAssignmentV1Beta1(levels=[tas.HOSTNAME_LEVEL], domains=domains))
        await kc.patch(v1b1, "v1", {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "count": 3, "topologyAssignment": v1_assignment}]}}}, ns, subresource="status")
        stored = msgspec.json.decode(await kc.get(v1b1, "v1", ns))
        assert stored["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == v1_assignment
        with pytest.raises(Invalid):
            await kc.patch(v1b1, "v1", {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "topologyAssignment": {"levels": ["x"], "domains": [{"values": ["a"], "count": "one"}]}}]}}},
                ns, subresource="status")

KUBEFLOW_NOUNS = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")
"""The training operator's kinds Kueue integrates, as its webhooks' paths name them."""


def test_manifests_render_as_multi_document_yaml() -> None:
    docs = list(fastyaml.safe_load_all(render(documents("all"))))
    kinds = [d["kind"] for d in docs]
    assert kinds.count("CustomResourceDefinition") == len(KUEUE_RESOURCES)
    people = len(user_roles())  # the batch admin/user ClusterRoles and the per-kind ones they aggregate
    assert kinds[len(KUEUE_RESOURCES):] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                            "Role", "RoleBinding", "RoleBinding", *["ClusterRole"] * people,
                                            "Service", "Service", "Deployment",
                                            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                                            "APIService", "APIService"]
    mutating = docs[kinds.index("MutatingWebhookConfiguration")]
    assert [(w["name"], w["clientConfig"]["service"]["path"]) for w in mutating["webhooks"]] == [
        ("mjob.kb.io", "/mutate-batch-v1-job"), ("mpod.kb.io", "/mutate--v1-pod"),
        ("mdeployment.kb.io", "/mutate-apps-v1-deployment"), ("mstatefulset.kb.io", "/mutate-apps-v1-statefulset"),
        ("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
        ("mmpijob.kb.io", "/mutate-kubeflow-org-v2beta1-mpijob"),
        ("mrayjob.kb.io", "/mutate-ray-io-v1-rayjob"), ("mraycluster.kb.io", "/mutate-ray-io-v1-raycluster"),
        ("mappwrapper.kb.io", "/mutate-workload-codeflare-dev-v1beta2-appwrapper"),
        ("mrayservice.kb.io", "/mutate-ray-io-v1-rayservice"),
        ("msparkapplication.kb.io", "/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication"),
        *((f"m{k}.kb.io", f"/mutate-kubeflow-org-v1-{k}") for k in KUBEFLOW_NOUNS),
        ("mleaderworkerset.kb.io", "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"),
        ("mtrainjob.kb.io", "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"),
        ("mpod.sparkapplication.kb.io", "/mutate-sparkoperator-k8s-io-v1beta2-sparkapplication-executor-pod")]
    # the integrations Kueue leaves off by default go fail-open, so a webhook down stops no Pod or workload controller
    assert {w["name"]: w["failurePolicy"] for w in mutating["webhooks"]} == {
        "mjob.kb.io": "Fail", "mpod.kb.io": "Ignore", "mdeployment.kb.io": "Ignore", "mstatefulset.kb.io": "Ignore",
        "mjobset.kb.io": "Ignore", "mmpijob.kb.io": "Ignore", **{f"m{k}.kb.io": "Ignore" for k in KUBEFLOW_NOUNS},
        "mrayjob.kb.io": "Ignore", "mraycluster.kb.io": "Ignore", "mleaderworkerset.kb.io": "Ignore",
        "mappwrapper.kb.io": "Ignore", "mtrainjob.kb.io": "Ignore", "mrayservice.kb.io": "Ignore",
        "msparkapplication.kb.io": "Ignore", "mpod.sparkapplication.kb.io": "Ignore"}
    validating = docs[kinds.index("ValidatingWebhookConfiguration")]
    assert next(w for w in validating["webhooks"] if w["name"] == "vjobset.kb.io")["failurePolicy"] == "Ignore"
    assert next(w for w in validating["webhooks"] if w["name"] == "vmpijob.kb.io")["failurePolicy"] == "Ignore"
    assert all(next(w for w in validating["webhooks"] if w["name"] == f"v{k}.kb.io")["failurePolicy"] == "Ignore"
               for k in KUBEFLOW_NOUNS)
    for name in ("vrayjob.kb.io", "vraycluster.kb.io", "vleaderworkerset.kb.io", "vappwrapper.kb.io",
                 "vtrainjob.kb.io", "vrayservice.kb.io", "vsparkapplication.kb.io"):
        assert next(w for w in validating["webhooks"] if w["name"] == name)["failurePolicy"] == "Ignore"
    dep = docs[kinds.index("Deployment")]
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["containers"][0]["args"][:2] == ["run", "--kube"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["KUEUE_ES_KUBE_WEBHOOK_PORT"] == "9443" and env["KUEUE_ES_KUBE_WEBHOOK_REGISTER"] == "true"
    assert env["KUEUE_ES_KUBE_VISIBILITY_PORT"] == "8082" and env["KUEUE_ES_KUBE_VISIBILITY_REGISTER"] == "true"
    pod_ip = next(e for e in pod["containers"][0]["env"] if e["name"] == "KUEUE_ES_KUBE_VISIBILITY_ADVERTISE_ADDRESS")
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}  # the leader routes it to itself
    service, visibility = (d for d in docs if d["kind"] == "Service")
    assert service["metadata"]["name"] == env["KUEUE_ES_KUBE_WEBHOOK_SERVICE"]
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    # the Service the APIServices name, shipped with them as Kueue's (443 to 8082); the leader routes it to itself
    assert visibility["metadata"]["name"] == env["KUEUE_ES_KUBE_VISIBILITY_SERVICE"]
    assert visibility["spec"] == {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8082}]}
    assert {a["spec"]["service"]["name"] for a in docs if a["kind"] == "APIService"} == {
        visibility["metadata"]["name"]}
    for crd in docs[:len(KUEUE_RESOURCES)]:  # converted by the webhook behind that Service; its CA is set at start
        assert crd["spec"]["conversion"] == {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"], "clientConfig": {"service": {
                "name": service["metadata"]["name"], "namespace": m.DEFAULT_NAMESPACE, "port": 443,
                "path": "/convert"}}}}


async def _allowed(api: client.ApiClient, user: str, verb: str, group: str, resource: str,
                   namespace: str = "", subresource: str = "", name: str = "") -> bool:
    review = await client.AuthorizationV1Api(api).create_subject_access_review(client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(user=user, resource_attributes=client.V1ResourceAttributes(
            verb=verb, group=group, resource=resource, namespace=namespace or None,
            subresource=subresource or None, name=name or None))))
    return bool(review.status.allowed)


@pytest.mark.asyncio
async def test_rbac_grants_what_the_connector_does_and_little_else(kube_apiserver) -> None:
    ns_name = f"kueue-es-rbac-{secrets.token_hex(3)}"
    sa = f"system:serviceaccount:{ns_name}:kueue-es-{ns_name}"
    async with await config.new_client_from_config(config_file=kube_apiserver.kubeconfig) as api:
        for doc in [m.namespace_object(ns_name), *m.rbac(ns_name, f"kueue-es-{ns_name}")]:
            await utils.create_from_dict(api, doc)

        async def ok(verb: str, group: str, resource: str, namespace: str = "", sub: str = "") -> bool:
            return await _allowed(api, sa, verb, group, resource, namespace, sub)

        for group, resource in [("", "pods"), ("", "nodes"), ("", "namespaces"), ("batch", "jobs"),
                                ("scheduling.k8s.io", "priorityclasses"), ("", "limitranges"),
                                ("node.k8s.io", "runtimeclasses"), ("kueue.x-k8s.io", "clusterqueues"),
                                ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "topologies")]:
            assert await ok("watch", group, resource), resource
            assert await ok("list", group, resource), resource
        assert await ok("create", "kueue.x-k8s.io", "workloads", "team-a")
        assert await ok("patch", "kueue.x-k8s.io", "workloads", "team-a")  # its finalizer, spec kept in step
        assert await ok("delete", "kueue.x-k8s.io", "workloads", "team-a")
        assert await ok("patch", "kueue.x-k8s.io", "workloads", "team-a", "status")
        assert await ok("patch", "batch", "jobs", "team-a")
        assert await ok("delete", "batch", "jobs", "team-a")  # afterDeactivatedByKueue retention
        assert await ok("patch", "kueue.x-k8s.io", "clusterqueues", "", "status")
        assert await ok("patch", "kueue.x-k8s.io", "localqueues", "team-a", "status")
        assert await ok("patch", "kueue.x-k8s.io", "resourceflavors")  # the resource-in-use finalizer
        assert await ok("update", "coordination.k8s.io", "leases", ns_name)
        assert await ok("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations")
        assert await ok("create", "admissionregistration.k8s.io", "validatingwebhookconfigurations")
        assert await _allowed(api, sa, "update", "admissionregistration.k8s.io", "validatingwebhookconfigurations",
                              name="kueue-es-validating-webhook-configuration")
        assert not await _allowed(api, sa, "update", "admissionregistration.k8s.io",
                                  "validatingwebhookconfigurations", name="someone-elses")
        assert await ok("create", "", "secrets", ns_name)
        assert await ok("watch", "autoscaling.x-k8s.io", "provisioningrequests")
        assert await ok("create", "autoscaling.x-k8s.io", "provisioningrequests", "team-a")
        assert await ok("delete", "autoscaling.x-k8s.io", "provisioningrequests", "team-a")
        assert await ok("create", "", "podtemplates", "team-a")
        assert await ok("patch", "", "pods", "team-a")  # the topology ungater, the pod integration
        assert await ok("delete", "", "pods", "team-a")  # the pod integration stops a Pod so
        assert await ok("patch", "", "pods", "team-a", "status")  # marked TerminationTarget first
        assert await ok("update", "", "pods", "team-a", "finalizers")  # a Workload owned by its Pod
        for verb in ("get", "list", "watch"):  # the revisions of the StatefulSets holding pod groups
            assert await ok(verb, "apps", "statefulsets"), verb
        assert not await ok("patch", "apps", "statefulsets", "team-a")
        for plural in ("replicasets", "deployments"):  # the Pod webhook looks through a ReplicaSet to its Deployment
            assert await ok("get", "apps", plural, "team-a"), plural
        assert not await ok("patch", "apps", "replicasets", "team-a")
        # what else kueue-es creates with blockOwnerDeletion: a Job's Workload, a Workload's ProvisioningRequest,
        # a request's PodTemplates (OwnerReferencesPermissionEnforcement asks for update on the owner's finalizers)
        assert await ok("update", "batch", "jobs", "team-a", "finalizers")
        assert await ok("update", "kueue.x-k8s.io", "workloads", "team-a", "finalizers")
        assert await ok("update", "autoscaling.x-k8s.io", "provisioningrequests", "team-a", "finalizers")
        assert await ok("watch", "jobset.x-k8s.io", "jobsets")  # the JobSet integration's own watch
        assert await ok("patch", "jobset.x-k8s.io", "jobsets", "team-a")  # suspend, templates in and out
        assert await ok("update", "jobset.x-k8s.io", "jobsets", "team-a", "finalizers")  # a Workload it owns
        assert not await ok("create", "jobset.x-k8s.io", "jobsets", "team-a")
        assert await ok("patch", "jobset.x-k8s.io", "jobsets", "team-a", "status")  # MultiKueue mirrors it
        assert await ok("watch", "kubeflow.org", "mpijobs")  # the MPIJob integration's own watch
        assert await ok("patch", "kubeflow.org", "mpijobs", "team-a")  # suspend, templates in and out
        assert await ok("update", "kubeflow.org", "mpijobs", "team-a", "finalizers")  # a Workload it owns
        assert not await ok("create", "kubeflow.org", "mpijobs", "team-a")
        assert await ok("patch", "kubeflow.org", "mpijobs", "team-a", "status")  # MultiKueue mirrors it
        multikueue_owners = {(r.group, r.plural) for r in m.MULTIKUEUE_OWNERS}  # whose status a manager mirrors
        lws = ("leaderworkerset.x-k8s.io", "leaderworkersets")
        assert await ok("watch", *lws)  # the LeaderWorkerSet integration's own watch
        assert await ok("update", *lws, "team-a", "finalizers")  # the group Workloads it owns
        assert not await ok("patch", *lws, "team-a")  # it never writes a LeaderWorkerSet
        assert not await ok("create", *lws, "team-a")
        for plural in (f"{k}s" for k in KUBEFLOW_NOUNS):  # the training operator's jobs: the same
            assert await ok("watch", "kubeflow.org", plural)
            assert await ok("patch", "kubeflow.org", plural, "team-a")
            assert await ok("update", "kubeflow.org", plural, "team-a", "finalizers")
            assert not await ok("create", "kubeflow.org", plural, "team-a")
            assert await ok("patch", "kubeflow.org", plural, "team-a", "status")  # MultiKueue mirrors it
        for plural in ("rayjobs", "rayclusters", "rayservices"):  # the Ray integrations' own watches, writes, Workloads
            assert await ok("watch", "ray.io", plural), plural
            assert await ok("patch", "ray.io", plural, "team-a"), plural
            assert await ok("update", "ray.io", plural, "team-a", "finalizers"), plural
            assert not await ok("create", "ray.io", plural, "team-a"), plural
            mirrored = ("ray.io", plural) in multikueue_owners  # a MultiKueue adapter's kind
            assert await ok("patch", "ray.io", plural, "team-a", "status") is mirrored, plural
        assert ("ray.io", "rayservices") in multikueue_owners  # MultiKueue's RayService adapter mirrors its status
        spark = ("sparkoperator.k8s.io", "sparkapplications")  # the SparkApplication integration's watch and writes
        assert await ok("watch", *spark)
        assert await ok("patch", *spark, "team-a")  # suspend, the roles' admission in and out
        assert await ok("update", *spark, "team-a", "finalizers")
        assert not await ok("create", *spark, "team-a")
        assert not await ok("patch", *spark, "team-a", "status")
        appwrappers = ("workload.codeflare.dev", "appwrappers")  # the AppWrapper integration's watch and writes
        assert await ok("watch", *appwrappers)
        assert await ok("patch", *appwrappers, "team-a")  # suspend, podSetInfos in and out
        assert await ok("update", *appwrappers, "team-a", "finalizers")  # a Workload it owns
        assert not await ok("create", *appwrappers, "team-a")
        assert await ok("patch", *appwrappers, "team-a", "status") is (appwrappers in multikueue_owners)
        trainjobs = ("trainer.kubeflow.org", "trainjobs")  # the TrainJob integration's watch and writes
        assert await ok("watch", *trainjobs)
        assert await ok("patch", *trainjobs, "team-a")  # suspend, podTemplateOverrides in and out
        assert await ok("update", *trainjobs, "team-a", "finalizers")  # a Workload it owns
        assert not await ok("create", *trainjobs, "team-a")
        assert await ok("patch", *trainjobs, "team-a", "status") is (trainjobs in multikueue_owners)
        for plural in ("trainingruntimes", "clustertrainingruntimes"):  # a TrainJob's pod sets are its runtime's
            assert await ok("watch", "trainer.kubeflow.org", plural), plural
            assert not await ok("patch", "trainer.kubeflow.org", plural, "team-a"), plural
        assert await ok("watch", "resource.k8s.io", "resourceclaimtemplates")  # what DRA claims cost
        assert not await ok("create", "resource.k8s.io", "resourceclaimtemplates", "team-a")
        assert await ok("watch", "resource.k8s.io", "deviceclasses")  # the extended resources DRA serves
        assert not await ok("create", "resource.k8s.io", "deviceclasses")
        assert await ok("watch", "resource.k8s.io", "resourceslices")  # the devices DRA drivers publish
        assert not await ok("create", "resource.k8s.io", "resourceslices")
        assert await ok("watch", "resource.k8s.io", "resourceclaims")  # the devices claims hold (device feasibility)
        assert not await ok("update", "resource.k8s.io", "resourceclaims", "team-a")
        assert await ok("watch", "resource.k8s.io", "devicetaintrules")  # the taints admins put on devices
        assert not await ok("create", "resource.k8s.io", "devicetaintrules")
        assert await ok("patch", "kueue.x-k8s.io", "admissionchecks", "", "status")
        assert await ok("patch", "kueue.x-k8s.io", "multikueueclusters", "", "status")  # their Active condition
        assert await ok("get", "", "secrets", ns_name)  # MultiKueue workers' kubeconfigs, in its own namespace only
        assert await ok("watch", "", "secrets", ns_name)  # each read once, then watched
        assert await ok("create", "", "events", "team-a")  # Kueue's Events: decisions carried out, Job actions
        # the visibility API: its APIServices, and the Service and endpoints routing them to the leader
        apiservices = ("apiregistration.k8s.io", "apiservices")
        assert await ok("create", *apiservices)
        assert await _allowed(api, sa, "update", *apiservices, name="v1beta2.visibility.kueue.x-k8s.io")
        assert not await _allowed(api, sa, "update", *apiservices, name="v1.apps")
        assert await _allowed(api, sa, "update", "", "endpoints", ns_name, name="kueue-es-visibility")
        assert await _allowed(api, sa, "update", "discovery.k8s.io", "endpointslices", ns_name,
                              name="kueue-es-visibility")
        assert not await _allowed(api, sa, "update", "", "services", ns_name, name="kubernetes")
        assert not await ok("create", "", "endpoints", "team-a")
        assert await _allowed(api, sa, "get", "", "configmaps", "kube-system",
                              name="extension-apiserver-authentication")  # the requestheader CA
        assert not await _allowed(api, sa, "get", "", "configmaps", "kube-system", name="kubeadm-config")

        assert not await ok("update", "kueue.x-k8s.io", "workloads", "team-a")  # spec: never
        assert not await ok("patch", "", "limitranges", "team-a")  # read only
        assert not await ok("create", "node.k8s.io", "runtimeclasses")
        assert not await ok("delete", "kueue.x-k8s.io", "clusterqueues")
        assert not await ok("create", "batch", "jobs", "team-a")
        assert not await ok("update", "kueue.x-k8s.io", "clusterqueues")
        assert not await ok("get", "", "secrets", "team-a")
        assert not await ok("list", "", "secrets", "team-a")
        assert not await ok("delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations")
        assert not await ok("update", "coordination.k8s.io", "leases", "kube-system")
        assert not await ok("create", "", "pods", "team-a")
        assert not await ok("update", "", "pods", "team-a")
        assert not await ok("patch", "", "events", "team-a")
        assert not await ok("update", "autoscaling.x-k8s.io", "provisioningrequests", "team-a", "status")
        crd = ("apiextensions.k8s.io", "customresourcedefinitions")
        assert await _allowed(api, sa, "patch", *crd, name="workloads.kueue.x-k8s.io")  # the conversion caBundle
        assert not await _allowed(api, sa, "patch", *crd, name="provisioningrequests.autoscaling.x-k8s.io")
        assert not await ok("create", *crd)
        assert not await ok("delete", *crd)


@pytest.mark.asyncio
async def test_the_apiserver_refuses_what_kueues_crd_markers_refuse_in_kueue_es_words(kube_apiserver) -> None:
    """events.crd_markers in the generated CRDs: the apiserver refuses a check state, an admission mode, a
    priority class's description, a topology level name or an int32 out of range Kueue's CRD refuses, with the
    field error import gives."""
    sfx = secrets.token_hex(3)
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "markers")
        wl = BY_KIND["Workload"]
        await create(kc, _tas_workload(ns, "w"))
        check = {"name": "ac", "state": "Ready", "lastTransitionTime": "2024-01-01T00:00:00Z", "message": ""}
        await kc.patch(wl, "w", {"status": {"admissionChecks": [check]}}, ns, subresource="status")
        with pytest.raises(Invalid) as refused:
            await kc.patch(wl, "w", {"status": {"admissionChecks": [{**check, "state": "Bogus"}]}}, ns,
                           subresource="status")
        assert ('status.admissionChecks[0].state: Unsupported value: "Bogus": supported values: "Pending", '
                '"Ready", "Retry", "Rejected"') in str(refused.value)
        long_level = _tas_workload(ns, "w2")
        long_level["spec"]["podSets"][0]["topologyRequest"] = {"required": "r" * 64}
        with pytest.raises(Invalid) as refused:
            await create(kc, long_level)
        assert "spec.podSets[0].topologyRequest.required: Too long: may not be more than 63 bytes" in str(
            refused.value)
        for scope, error in (({"admissionMode": "NoAdmissionFairSharing"}, None),
                             ({"admissionMode": "Bogus"},
                              'spec.admissionScope.admissionMode: Unsupported value: "Bogus": '
                              'supported values: "UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"'),
                             ({}, "spec.admissionScope.admissionMode: Required value")):
            cq = cluster_queue(f"cq-{secrets.token_hex(3)}", {f"default-{sfx}": {"cpu": 1}})
            cq["spec"]["admissionScope"] = scope
            if error is None:
                await create(kc, cq)
                continue
            with pytest.raises(Invalid) as refused:
                await create(kc, cq)
            assert error in str(refused.value)
        wpc = {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": f"p-{sfx}"},
               "value": 1}
        await create(kc, {**wpc, "description": "d" * 2048})
        with pytest.raises(Invalid) as refused:
            await create(kc, {**wpc, "metadata": {"name": f"q-{sfx}"}, "description": "d" * 2049})
        assert "description: Too long: may not be more than 2048 bytes" in str(refused.value)
        await create(kc, {**wpc, "metadata": {"name": f"max-{sfx}"}, "value": INT32_MAX})
        too_high = _tas_workload(ns, "w3")
        too_high["spec"]["priority"] = INT32_MAX + 1
        too_high["spec"]["podSets"][0]["count"] = 3_000_000_000
        for doc, fields in ((too_high, ("spec.podSets[0].count", "spec.priority")),
                            ({**wpc, "metadata": {"name": f"r-{sfx}"}, "value": 3_000_000_000}, ("value",))):
            with pytest.raises(Invalid) as refused:
                await create(kc, doc)
            for field in fields:  # the apiserver's words, as import gives them
                words = f"Checked value must be of type integer with format int32 in {field}"
                assert words in str(refused.value)


@pytest.mark.asyncio
async def test_the_apiserver_refuses_a_provisioning_request_config_as_import_does(kube_apiserver) -> None:
    """The ProvisioningRequestConfig markers (Kueue has no webhook for the kind): the class name's pattern, a
    managed resource given twice (a set), a node-selector key given twice (a map), an empty detail key; a
    negative retry strategy is stored, as Kueue's CRD stores it."""
    sfx = secrets.token_hex(3)
    prc = {"apiVersion": KUEUE, "kind": "ProvisioningRequestConfig", "metadata": {"name": f"prc-{sfx}"},
           "spec": {"provisioningClassName": "Check_Capacity", "managedResources": ["cpu", "cpu"],
                    "podSetUpdates": {"nodeSelector": [
                        {"key": "pool", "valueFromProvisioningClassDetail": ""},
                        {"key": "pool", "valueFromProvisioningClassDetail": "d"}]}}}
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        with pytest.raises(Invalid) as refused:
            await create(kc, prc)
        for error in _import_errors(prc):  # each field error import gives, in the apiserver's message
            assert error in str(refused.value), (error, str(refused.value))
        await create(kc, {**prc, "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                                          "retryStrategy": {"backoffLimitCount": -1,
                                                            "backoffBaseSeconds": -5}}})


def _import_errors(doc: dict) -> list[str]:
    """The CRD's field errors ``kueue-es import`` refuses ``doc`` for, as the apiserver writes them
    (``<path>: <body>``)."""
    with pytest.raises(SchemaRefused) as refused:
        decode_object(doc, "object")
    return [e.replace("field `", "", 1).replace("`:", ":", 1) for e in refused.value.errors]


@pytest.mark.asyncio
async def test_the_apiserver_ratchets_kueues_crd_markers_on_an_update_leaving_the_field_as_it_was(
        kube_apiserver) -> None:
    """What the validating webhooks mirror (events.crd_markers.ratcheted): an object stored under a laxer CRD
    takes an update that leaves its invalid field as it was (a status write, a label), not one that changes
    it."""
    sfx = secrets.token_hex(3)
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc, docs=[lax_crd("Workload", "spec.podSets[].topologyRequest.required"),
                                     lax_crd("WorkloadPriorityClass", "description"),
                                     lax_crd("ClusterQueue", "spec.admissionScope", "required")])
        ns = await namespace(kc, "ratchet")
        stored = _tas_workload(ns, "w")
        stored["spec"]["podSets"][0]["topologyRequest"] = {"required": "r" * 64}
        await schema_takes(kc, stored)
        await create(kc, stored)
        wpc = {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": f"p-{sfx}"},
               "value": 1, "description": "d" * 2049}
        cq = cluster_queue(f"cq-{sfx}", {f"default-{sfx}": {"cpu": 1}})
        cq["spec"]["admissionScope"] = {}
        for doc in (wpc, cq):
            await schema_takes(kc, doc)
            await create(kc, doc)
        await crds.install(kc)  # the markers back
        for doc in (stored, wpc, cq):
            await schema_takes(kc, doc, False)
        wl, wpcs = BY_KIND["Workload"], BY_KIND["WorkloadPriorityClass"]
        check = {"name": "ac", "state": "Ready", "lastTransitionTime": "2024-01-01T00:00:00Z", "message": ""}
        await kc.patch(wl, "w", {"status": {"admissionChecks": [check]}}, ns, subresource="status")
        await kc.patch(wpcs, f"p-{sfx}", {"metadata": {"labels": {"a": "b"}}})
        await kc.patch(BY_KIND["ClusterQueue"], f"cq-{sfx}", {"metadata": {"labels": {"a": "b"}}})
        with pytest.raises(Invalid) as refused:
            await kc.patch(wpcs, f"p-{sfx}", {"description": "e" * 2049})
        assert "description: Too long: may not be more than 2048 bytes" in str(refused.value)
        # an integer format (int32) the same way
        await crds.install(kc, docs=[lax_crd("WorkloadPriorityClass", "value", "format")])
        past = {**wpc, "metadata": {"name": f"q-{sfx}"}, "value": 2**31, "description": "d"}
        await schema_takes(kc, past)
        await create(kc, past)
        await crds.install(kc)
        await schema_takes(kc, past, False)
        await kc.patch(wpcs, f"q-{sfx}", {"metadata": {"labels": {"a": "b"}}})
        with pytest.raises(Invalid):
            await kc.patch(wpcs, f"q-{sfx}", {"value": 2**31 + 1})


async def _aggregate(api: client.ApiClient, name: str) -> None:
    """What kube-controller-manager's ClusterRole aggregation controller (not run here) does for ``name``: its
    rules become those of every ClusterRole its selectors match, selected by the apiserver."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = await rbac.read_cluster_role(name)
    rules = []
    for selector in role.aggregation_rule.cluster_role_selectors:
        matched = await rbac.list_cluster_role(
            label_selector=",".join(f"{k}={v}" for k, v in selector.match_labels.items()))
        rules += [rule for r in matched.items for rule in r.rules or []]
    role.rules = rules
    await rbac.replace_cluster_role(name, role)


@pytest.mark.asyncio
async def test_the_batch_roles_kueues_rbac_guide_binds_grant_an_admin_and_a_user(kube_apiserver) -> None:
    """Bound as Kueue's RBAC guide binds them: the admin by a ClusterRoleBinding, a team's users by a
    RoleBinding in their namespace."""
    sfx = secrets.token_hex(3)
    team, other = f"team-a-{sfx}", f"team-b-{sfx}"
    admin, user = f"admin-{sfx}@example.com", f"alice-{sfx}@example.com"
    async with await config.new_client_from_config(config_file=kube_apiserver.kubeconfig) as api:
        for doc in [*user_roles(), m.namespace_object(team), m.namespace_object(other)]:
            await utils.create_from_dict(api, doc)
        for name in ("kueue-batch-admin-role", "kueue-batch-user-role"):
            await _aggregate(api, name)
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole"}
        await utils.create_from_dict(api, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"batch-admins-{sfx}"}, "roleRef": {**ref, "name": "kueue-batch-admin-role"},
            "subjects": [{"kind": "User", "name": admin, "apiGroup": "rbac.authorization.k8s.io"}]})
        await utils.create_from_dict(api, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "batch-users", "namespace": team},
            "roleRef": {**ref, "name": "kueue-batch-user-role"},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]})

        async def can(who: str, verb: str, group: str, resource: str, namespace: str = "",
                      sub: str = "") -> bool:
            return await _allowed(api, who, verb, group, resource, namespace, sub)

        # the apiserver's authorizer sees new bindings and aggregated rules through its informers: not at once
        await eventually(lambda: can(user, "get", "kueue.x-k8s.io", "workloads", team),
                         what="the user's grant")
        await eventually(lambda: can(admin, "create", "kueue.x-k8s.io", "clusterqueues"),
                         what="the admin's grant")
        assert await can(user, "list", "kueue.x-k8s.io", "localqueues", team)
        assert await can(user, "get", "visibility.kueue.x-k8s.io", "localqueues", team, "pendingworkloads")
        assert await can(user, "create", "batch", "jobs", team)
        assert await can(user, "create", "jobset.x-k8s.io", "jobsets", team)
        assert not await can(user, "create", "kueue.x-k8s.io", "clusterqueues")
        assert not await can(user, "get", "kueue.x-k8s.io", "clusterqueues")
        assert not await can(user, "create", "kueue.x-k8s.io", "localqueues", team)
        assert not await can(user, "get", "kueue.x-k8s.io", "workloads", other)  # only where bound
        assert await can(admin, "create", "kueue.x-k8s.io", "clusterqueues")
        assert await can(admin, "update", "kueue.x-k8s.io", "resourceflavors")
        assert await can(admin, "create", "kueue.x-k8s.io", "localqueues", other)
        assert await can(admin, "get", "visibility.kueue.x-k8s.io", "clusterqueues", "", "pendingworkloads")
        assert not await can(admin, "create", "", "pods", team)  # what Kueue's roles do not cover
