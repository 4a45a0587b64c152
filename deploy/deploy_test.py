"""Checks the Kubernetes manifest against what sluiced does (issue 25).

The manifest is only worth shipping if its numbers agree with the daemon's
behaviour: the probes hit the ports sluiced listens on, and the pod's grace
period covers the drain. kubectl is not needed; the file is parsed as YAML.
"""
import os
import re
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return list(yaml.safe_load_all(f))


def flag(args, name):
    for a in args:
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    raise AssertionError("--%s missing from the container args" % name)


class ManifestTest(unittest.TestCase):
    def setUp(self):
        docs = {d["kind"]: d for d in load("kubernetes/sluiced.yaml")}
        self.service = docs["Service"]
        self.pod = docs["Deployment"]["spec"]["template"]["spec"]
        self.container = self.pod["containers"][0]
        self.args = self.container["args"]
        self.ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}

    def test_listen_addresses_match_the_declared_ports(self):
        for name, f in [("grpc", "grpc_address"), ("http", "http_address"),
                        ("metrics", "metrics_address")]:
            self.assertEqual(int(flag(self.args, f).rsplit(":", 1)[1]), self.ports[name])

    def test_probes_use_grpc_health_on_the_grpc_port(self):
        for probe in ("startupProbe", "readinessProbe"):
            self.assertEqual(self.container[probe]["grpc"]["port"], self.ports["grpc"])
        self.assertEqual(self.container["livenessProbe"]["httpGet"]["port"], "metrics")

    def test_grace_period_covers_the_drain(self):
        drain = int(flag(self.args, "drain_notice_s")) + int(flag(self.args, "drain_timeout_s"))
        # The supervisor gives the worker 5 s after the drain (OPERATIONS.md).
        self.assertGreater(self.pod["terminationGracePeriodSeconds"], drain + 5)

    def test_readiness_drops_the_pod_within_the_drain_notice(self):
        p = self.container["readinessProbe"]
        self.assertLessEqual(p["periodSeconds"] * p["failureThreshold"],
                             int(flag(self.args, "drain_notice_s")))

    def test_service_targets_every_named_port(self):
        self.assertEqual({p["targetPort"] for p in self.service["spec"]["ports"]},
                         set(self.ports))

    def test_non_loopback_addresses_carry_keys(self):
        self.assertIn("--insecure", self.args)
        self.assertTrue(flag(self.args, "api_keys_file"))


class HaproxyTest(unittest.TestCase):
    def test_every_server_checks_health_over_http1(self):
        with open(os.path.join(HERE, "haproxy/sluiced.cfg")) as f:
            servers = [l.split() for l in f if l.strip().startswith("server ")]
        self.assertEqual(len(servers), 4)
        for s in servers:
            if "h2" in s:  # gRPC: the check goes to the replica's HTTP port
                self.assertIn("check-proto", s)
                self.assertRegex(s[s.index("port") + 1], r"HTTP_PORT")


if __name__ == "__main__":
    unittest.main()
