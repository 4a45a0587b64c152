#!/usr/bin/python3
"""Tests of the example Python client against a live sluiced.

Started by //tests:e2e_clients_test, which runs a daemon and passes its
address in SLUICE_ADDR and the loaded model's id in SLUICE_MODEL_ID.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
import sluice_client  # noqa: E402


class SluiceClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = sluice_client.SluiceClient(os.environ["SLUICE_ADDR"], timeout=60)
        cls.model_id = os.environ["SLUICE_MODEL_ID"]

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_health_is_serving(self):
        self.assertEqual(self.client.health(), "SERVING")

    def test_models_lists_the_loaded_model(self):
        models = self.client.models()
        self.assertEqual([m.model_id for m in models], [self.model_id])
        self.assertEqual(models[0].architecture, "qwen35moe")

    def test_streamed_chunks_add_up_to_the_final_usage(self):
        chunks = list(self.client.generate("Hello from Python", max_tokens=6, ignore_eos=True))
        self.assertEqual(len(chunks), 6)
        self.assertEqual(self.client.last_done.usage.completion_tokens, 6)

    def test_greedy_is_deterministic_and_matches_token_ids_input(self):
        a = self.client.generate_all("Hello from Python", max_tokens=8, ignore_eos=True)
        ids, _ = self.client.tokenize("Hello from Python")
        b = self.client.generate_all(token_ids=ids, max_tokens=8, ignore_eos=True)
        self.assertEqual(len(a.token_ids), 8)
        self.assertEqual(a.token_ids, b.token_ids)
        self.assertEqual(a.done.usage.prompt_tokens, len(ids))

    def test_seeded_sampling_repeats(self):
        kw = dict(max_tokens=8, ignore_eos=True, temperature=0.9, seed=99)
        self.assertEqual(self.client.generate_all("seeded", **kw).token_ids,
                         self.client.generate_all("seeded", **kw).token_ids)

    def test_chat_input(self):
        r = self.client.generate_all(chat=[("user", "hi")], max_tokens=3, ignore_eos=True)
        self.assertEqual(r.done.usage.completion_tokens, 3)

    def test_errors_carry_code_and_message(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.generate_all("x", max_tokens=2, top_p=0.0)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("top_p", cm.exception.details())
        with self.assertRaises(grpc.RpcError) as cm:
            self.client.load("/nonexistent/model.gguf")
        # Outside every --model_dir.
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("/nonexistent/model.gguf", cm.exception.details())

    def test_metrics_text(self):
        text = self.client.metrics()
        self.assertIn("sluice_generated_tokens_total ", text)
        self.assertIn("sluice_worker_up 1", text)

    def test_cli_main(self):
        self.assertEqual(sluice_client.main(["--addr", os.environ["SLUICE_ADDR"], "health"]), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
