#!/usr/bin/python3
"""Trains the demo qwen3moe model on the fortunes corpus and exports it.

  /usr/bin/python3 train/train_demo.py --out out/demo-train --steps 1500 --minutes 22

Writes into --out:
  tokenizer.json  the byte-level BPE vocabulary (tokens, token types, merges)
  weights.json    the hyper-parameters, the losses and one entry per tensor
                  (GGUF name, shape in ggml order ne[0] first, byte offset)
  weights.bin     the tensors, little-endian float32, in weights.json's order
tools/import_weights turns the three into a GGUF file.

The forward pass is the one Sluice's model/qwen3moe.cc runs (and llama.cpp's
qwen3moe graph): RMSNorm (eps 1e-6) before attention and before the MoE FFN;
per-head RMSNorm of q and k (same eps) then NEOX RoPE (pair i is dims i and
i + head_dim/2, angle pos * base^(-2i/head_dim)); GQA where head h reads kv
head h // (n_head / n_head_kv); softmax(q k^T / sqrt(head_dim)) v; the
router's softmax over all experts, the top-k probabilities renormalised to
sum 1; each expert down(silu(gate x) * up x); a final RMSNorm and an untied
output matrix. No biases anywhere.

Tokenization: the qwen2 pre-tokenizer expression (model/tokenizer_unicode.h),
then BPE merges by rank. The corpus keeps only entries of printable ASCII,
newlines and tabs, where the expression's classes reduce to ASCII ones, so
Python's re module reproduces it exactly. Vocabulary layout as mkmodel's
(model/testing/mkmodel.h): 256 byte tokens in GPT-2's byte-to-unicode
spelling, the learned merges, then <|endoftext|> <|im_start|> <|im_end|>.
Every fortune is followed by <|im_end|> (the file's eos id) in the training
stream, so generation stops at the end of a fortune.

Deterministic for a given --seed and --steps on one machine and device (the
corpus order, the BPE ties, the initial weights and the batches are all
fixed by them); --minutes only stops a run early.
"""

import argparse
import heapq
import json
import math
import os
import re
import struct
import sys
import time

FORTUNE_DIR = "/usr/share/games/fortunes"
# Pictures, not sentences.
EXCLUDED_FILES = {"ascii-art"}
# Every HELD_OUT_EVERY-th kept entry (counting from 0) is held out.
HELD_OUT_EVERY = 20
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# The qwen2 expression with \p{L} = [A-Za-z] and \p{N} = [0-9], exact for
# ASCII text.
QWEN2_ASCII = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
    r"| ?[^\sA-Za-z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# ---- Corpus ------------------------------------------------------------------

def is_kept(entry):
    return all(32 <= ord(c) < 127 or c in "\n\t" for c in entry)


def read_fortunes(directory=FORTUNE_DIR):
    """(train, held_out) lists of entries, in file-name then file order.

    A file is every plain file without a '.' in its name (not the .dat
    indexes, not the .u8 links) except EXCLUDED_FILES; entries are separated
    by lines holding only '%'; each entry is stripped of surrounding
    whitespace and kept when non-empty and printable ASCII (is_kept).
    """
    entries = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or name in EXCLUDED_FILES or os.path.islink(path):
            continue
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("latin-1")
        lines = []
        for line in text.split("\n") + ["%"]:
            if line != "%":
                lines.append(line)
                continue
            entry = "\n".join(lines).strip(" \t\n\r\x0b\x0c")
            lines = []
            if entry and is_kept(entry):
                entries.append(entry)
    held = [e for i, e in enumerate(entries) if i % HELD_OUT_EVERY == 0]
    train = [e for i, e in enumerate(entries) if i % HELD_OUT_EVERY != 0]
    return train, held


# ---- Tokenizer ---------------------------------------------------------------

def byte_to_unicode():
    """GPT-2's map: printable bytes stand for themselves, the others take
    code points 256, 257, ... in byte order."""
    printable = (list(range(33, 127)) + list(range(161, 173)) +
                 list(range(174, 256)))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


BYTE_TO_UNICODE = byte_to_unicode()


def spell(word):
    return tuple(BYTE_TO_UNICODE[b] for b in word.encode("utf-8"))


def pre_tokenize(text):
    return QWEN2_ASCII.findall(text)


def train_bpe(texts, n_merges):
    """Merges learned from `texts`: the most frequent adjacent pair first,
    ties to the smaller pair (string order); a pair whose concatenation is
    already a token is never merged (it would duplicate that token)."""
    counts = {}
    for t in texts:
        for w in pre_tokenize(t):
            s = spell(w)
            counts[s] = counts.get(s, 0) + 1
    words = [list(w) for w in counts]
    freq = list(counts.values())
    pair_count, pair_words = {}, {}
    changed = set()

    def add_pairs(i, sign):
        w = words[i]
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + sign * freq[i]
            changed.add((a, b))
            if sign > 0:
                pair_words.setdefault((a, b), set()).add(i)

    for i in range(len(words)):
        add_pairs(i, 1)
    # A heap of (-count, pair) with stale entries skipped: every count
    # change pushes a fresh entry, so the first live entry is the best pair.
    heap = []
    known = set(BYTE_TO_UNICODE.values())
    merges = []
    while len(merges) < n_merges:
        for p in changed:
            if pair_count.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_count[p], p))
        changed.clear()
        best = None
        while heap:
            neg, p = heapq.heappop(heap)
            if pair_count.get(p, 0) == -neg and p[0] + p[1] not in known:
                best = p
                break
        if best is None:
            break
        a, b = best
        merges.append(best)
        known.add(a + b)
        for i in sorted(pair_words.pop(best, ())):
            w = words[i]
            add_pairs(i, -1)
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            add_pairs(i, 1)
        pair_count.pop(best, None)
        changed.discard(best)
    return merges


class Tokenizer:
    """Encodes as model/tokenizer.cc does: words by the expression, then in
    each word the adjacent pair of lowest merge rank first, leftmost on
    ties, until no pair has a rank."""

    def __init__(self, merges):
        self.merges = merges
        self.tokens = [BYTE_TO_UNICODE[b] for b in range(256)]
        self.tokens += [a + b for a, b in merges]
        self.token_types = [1] * len(self.tokens)
        self.tokens += SPECIAL_TOKENS
        self.token_types += [3] * len(SPECIAL_TOKENS)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.cache = {}
        self.eos = self.ids["<|im_end|>"]
        self.bos = self.ids["<|endoftext|>"]

    def encode_word(self, word):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        sym = list(spell(word))
        while len(sym) > 1:
            best, best_rank = -1, None
            for j in range(len(sym) - 1):
                r = self.ranks.get((sym[j], sym[j + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = j, r
            if best < 0:
                break
            sym[best:best + 2] = [sym[best] + sym[best + 1]]
        ids = [self.ids[s] for s in sym]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        out = []
        for w in pre_tokenize(text):
            out.extend(self.encode_word(w))
        return out

    def decode(self, ids):
        inv = {v: k for k, v in BYTE_TO_UNICODE.items()}
        data = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.token_types[i] == 3:
                data += t.encode("utf-8")
            else:
                data += bytes(inv[c] for c in t)
        return data.decode("utf-8", errors="replace")

    def to_json(self):
        return {"model": "gpt2", "pre": "qwen2", "tokens": self.tokens,
                "token_types": self.token_types,
                "merges": [a + " " + b for a, b in self.merges],
                "bos_token_id": self.bos, "eos_token_id": self.eos}


def token_stream(tok, entries):
    out = []
    for e in entries:
        out.extend(tok.encode(e))
        out.append(tok.eos)
    return out


# ---- Model -------------------------------------------------------------------

def build_model(torch, cfg):
    nn = torch.nn
    F = torch.nn.functional
    E, H, KV, D = cfg["n_embd"], cfg["n_head"], cfg["n_head_kv"], cfg["head_dim"]
    X, K, FF = cfg["n_expert"], cfg["n_expert_used"], cfg["expert_ff"]
    eps = cfg["rms_eps"]

    def rms_norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def rope(x, cos, sin):  # x [B, heads, T, D]; NEOX pairs (i, i + D/2)
        h = D // 2
        x0, x1 = x[..., :h], x[..., h:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            p = lambda *s: nn.Parameter(torch.empty(*s))
            self.attn_norm = nn.Parameter(torch.ones(E))
            self.wq, self.wk, self.wv = p(H * D, E), p(KV * D, E), p(KV * D, E)
            self.wo = p(E, H * D)
            self.q_norm = nn.Parameter(torch.ones(D))
            self.k_norm = nn.Parameter(torch.ones(D))
            self.ffn_norm = nn.Parameter(torch.ones(E))
            self.router = p(X, E)
            self.gate, self.up, self.down = p(X, FF, E), p(X, FF, E), p(X, E, FF)

        def attention(self, x, cos, sin, mask):
            B, T, _ = x.shape
            q = (x @ self.wq.t()).view(B, T, H, D).transpose(1, 2)
            k = (x @ self.wk.t()).view(B, T, KV, D).transpose(1, 2)
            v = (x @ self.wv.t()).view(B, T, KV, D).transpose(1, 2)
            q = rope(rms_norm(q, self.q_norm), cos, sin)
            k = rope(rms_norm(k, self.k_norm), cos, sin)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
            s = s.masked_fill(mask, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            return o.transpose(1, 2).reshape(B, T, H * D) @ self.wo.t()

        def moe(self, x):
            B, T, _ = x.shape
            xf = x.reshape(B * T, E)
            p = torch.softmax(xf @ self.router.t(), dim=-1)
            top_p, top_i = torch.topk(p, K, dim=-1)
            w = top_p / top_p.sum(-1, keepdim=True).clamp_min(6.103515625e-5)
            out = torch.zeros_like(xf)
            for e in range(X):
                tok, slot = torch.nonzero(top_i == e, as_tuple=True)
                if tok.numel() == 0:
                    continue
                h = xf.index_select(0, tok)
                y = (F.silu(h @ self.gate[e].t()) * (h @ self.up[e].t())) @ self.down[e].t()
                out.index_add_(0, tok, y * w[tok, slot].unsqueeze(1))
            # Switch-style balance: n_expert * sum_e (share of slots) * (mean p).
            share = torch.zeros(X, device=x.device).scatter_add_(
                0, top_i.reshape(-1), torch.ones(top_i.numel(), device=x.device))
            share = share / top_i.numel()
            balance = X * (share * p.mean(0)).sum()
            return out.view(B, T, E), balance

        def forward(self, x, cos, sin, mask):
            x = x + self.attention(rms_norm(x, self.attn_norm), cos, sin, mask)
            y, balance = self.moe(rms_norm(x, self.ffn_norm))
            return x + y, balance

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embd = nn.Parameter(torch.empty(cfg["n_vocab"], E))
            self.blocks = nn.ModuleList([Block() for _ in range(cfg["n_layer"])])
            self.output_norm = nn.Parameter(torch.ones(E))
            self.output = nn.Parameter(torch.empty(cfg["n_vocab"], E))
            resid = 0.02 / math.sqrt(2 * cfg["n_layer"])
            for name, prm in self.named_parameters():
                if prm.dim() >= 2:
                    std = resid if name.endswith(("wo", "down")) else 0.02
                    nn.init.normal_(prm, 0.0, std)

        def forward(self, ids):
            T = ids.shape[1]
            pos = torch.arange(T, device=ids.device, dtype=torch.float32)
            inv = cfg["rope_freq_base"] ** (
                -torch.arange(0, D // 2, device=ids.device, dtype=torch.float32) * 2 / D)
            ang = pos[:, None] * inv[None, :]
            cos, sin = torch.cos(ang), torch.sin(ang)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=ids.device), 1)
            x = self.token_embd[ids]
            balance = 0.0
            for blk in self.blocks:
                x, b = blk(x, cos, sin, mask)
                balance = balance + b
            logits = rms_norm(x, self.output_norm) @ self.output.t()
            return logits, balance / len(self.blocks)

    return Model()


# The GGUF names of a block's parameters (model/qwen3moe.cc binds them).
BLOCK_NAMES = {
    "attn_norm": "attn_norm.weight", "wq": "attn_q.weight",
    "wk": "attn_k.weight", "wv": "attn_v.weight", "wo": "attn_output.weight",
    "q_norm": "attn_q_norm.weight", "k_norm": "attn_k_norm.weight",
    "ffn_norm": "ffn_norm.weight", "router": "ffn_gate_inp.weight",
    "gate": "ffn_gate_exps.weight", "up": "ffn_up_exps.weight",
    "down": "ffn_down_exps.weight",
}


def gguf_name(param_name):
    parts = param_name.split(".")
    if parts[0] == "blocks":
        return "blk.%s.%s" % (parts[1], BLOCK_NAMES[parts[2]])
    return parts[0] + ".weight"


def load_export(torch, model, export_dir):
    """Copies the tensors of an earlier export into model (same shapes)."""
    with open(os.path.join(export_dir, "weights.json")) as f:
        by_name = {t["name"]: t for t in json.load(f)["tensors"]}
    with open(os.path.join(export_dir, "weights.bin"), "rb") as f:
        raw = f.read()
    with torch.no_grad():
        for name, prm in model.named_parameters():
            t = by_name[gguf_name(name)]
            chunk = bytearray(raw[t["offset"]: t["offset"] + 4 * prm.numel()])
            prm.copy_(torch.frombuffer(chunk, dtype=torch.float32).view(prm.shape))


def export(model, cfg, losses, out_dir):
    """weights.json + weights.bin; shapes in ggml order (torch's reversed:
    a [rows][cols] matrix is ne = [cols, rows])."""
    entries, offset = [], 0
    with open(os.path.join(out_dir, "weights.bin"), "wb") as f:
        for name, prm in model.named_parameters():
            data = prm.detach().to("cpu").float().contiguous().numpy()
            raw = data.astype("<f4").tobytes()
            entries.append({"name": gguf_name(name), "ne": list(data.shape)[::-1],
                            "offset": offset})
            f.write(raw)
            offset += len(raw)
    with open(os.path.join(out_dir, "weights.json"), "w") as f:
        json.dump({"config": cfg, "losses": losses, "tensors": entries}, f, indent=1)


# ---- Training ----------------------------------------------------------------

def evaluate(torch, model, stream, ctx, batch, device):
    """Mean next-token NLL over non-overlapping windows of ctx + 1 tokens."""
    F = torch.nn.functional
    n_win = (len(stream) - 1) // ctx
    data = torch.tensor(stream[: n_win * ctx + 1], dtype=torch.long)
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for start in range(0, n_win, batch):
            rows = range(start, min(n_win, start + batch))
            x = torch.stack([data[r * ctx: r * ctx + ctx] for r in rows]).to(device)
            y = torch.stack([data[r * ctx + 1: r * ctx + ctx + 1] for r in rows]).to(device)
            logits, _ = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                     y.reshape(-1), reduction="sum").item()
            count += y.numel()
    model.train()
    return total / max(count, 1)


def parse_args(argv):
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--out", required=True, help="output directory")
    a.add_argument("--steps", type=int, default=1500, help="optimizer steps (LR schedule length)")
    a.add_argument("--minutes", type=float, default=0, help="stop after this wall time (0: no cap)")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    a.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    a.add_argument("--vocab", type=int, default=2048)
    a.add_argument("--ctx", type=int, default=256, help="training sequence length")
    a.add_argument("--batch", type=int, default=16, help="sequences per step")
    a.add_argument("--lr", type=float, default=3e-3)
    a.add_argument("--balance", type=float, default=0.01, help="expert balance loss weight")
    a.add_argument("--n_embd", type=int, default=256)
    a.add_argument("--n_layer", type=int, default=4)
    a.add_argument("--n_head", type=int, default=4)
    a.add_argument("--n_head_kv", type=int, default=2)
    a.add_argument("--n_expert", type=int, default=8)
    a.add_argument("--n_expert_used", type=int, default=2)
    a.add_argument("--expert_ff", type=int, default=256)
    a.add_argument("--eval_every", type=int, default=100,
                   help="steps between held-out losses (on its first 8192 tokens)")
    a.add_argument("--corpus_dir", default=FORTUNE_DIR)
    a.add_argument("--init", default="",
                   help="start from this earlier export's weights (same shape) instead of random ones")
    return a.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    train, held = read_fortunes(args.corpus_dir)
    n_merges = args.vocab - 256 - len(SPECIAL_TOKENS)
    tok = Tokenizer(train_bpe(train, n_merges))
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump(tok.to_json(), f, ensure_ascii=False)
    train_ids, held_ids = token_stream(tok, train), token_stream(tok, held)
    print("corpus: %d train entries (%d tokens), %d held out (%d tokens); "
          "vocabulary %d; %.0f s" % (len(train), len(train_ids), len(held),
                                     len(held_ids), len(tok.tokens), time.time() - t0),
          flush=True)

    cfg = {"arch": "qwen3moe", "n_vocab": len(tok.tokens), "n_embd": args.n_embd,
           "n_layer": args.n_layer, "n_head": args.n_head, "n_head_kv": args.n_head_kv,
           "head_dim": args.n_embd // args.n_head, "n_expert": args.n_expert,
           "n_expert_used": args.n_expert_used, "expert_ff": args.expert_ff,
           "context_length": args.ctx, "rms_eps": 1e-6, "rope_freq_base": 10000.0}
    model = build_model(torch, cfg)
    if args.init:
        load_export(torch, model, args.init)
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print("model: %d parameters on %s" % (n_params, device), flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    data = torch.tensor(train_ids, dtype=torch.long)
    gen = torch.Generator().manual_seed(args.seed)
    warmup = max(1, args.steps // 20)
    F = torch.nn.functional
    log, step, train_loss = [], 0, float("nan")
    t_train = time.time()
    while step < args.steps:
        if args.minutes and time.time() - t_train > args.minutes * 60:
            print("stopping at step %d: --minutes %.1f reached" % (step, args.minutes))
            break
        lr = args.lr * min(1.0, (step + 1) / warmup) * (
            0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(data) - args.ctx - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s: s + args.ctx] for s in starts]).to(device)
        y = torch.stack([data[s + 1: s + args.ctx + 1] for s in starts]).to(device)
        logits, balance = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        (loss + args.balance * balance).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        train_loss = 0.9 * train_loss + 0.1 * loss.item() if step > 1 else loss.item()
        if step % 25 == 0 or step == 1:
            print("step %d  loss %.4f  (smoothed %.4f)  balance %.3f  lr %.2e  %.0f s"
                  % (step, loss.item(), train_loss, balance.item(), lr,
                     time.time() - t_train), flush=True)
        if step % args.eval_every == 0:
            h = evaluate(torch, model, held_ids[:8192], args.ctx, args.batch, device)
            log.append({"step": step, "train": train_loss, "held_out": h})
            print("step %d  held-out loss %.4f" % (step, h), flush=True)
    held_loss = evaluate(torch, model, held_ids, args.ctx, args.batch, device)
    train_eval = evaluate(torch, model, train_ids[: len(held_ids)], args.ctx, args.batch, device)
    losses = {"steps": step, "init": args.init, "train_smoothed": train_loss, "train_eval": train_eval,
              "held_out": held_loss, "log": log, "train_seconds": time.time() - t_train,
              "device": device, "threads": args.threads, "seed": args.seed,
              "torch": torch.__version__}
    print("done: %d steps, train %.4f (eval on %d tokens %.4f), held-out %.4f, %.0f s"
          % (step, train_loss, len(held_ids), train_eval, held_loss, time.time() - t_train),
          flush=True)
    export(model, cfg, losses, args.out)
    with torch.no_grad():
        model.eval()
        ids = tok.encode("A fool and his money")
        for _ in range(40):
            logits, _ = model(torch.tensor([ids], device=device))
            ids.append(int(logits[0, -1].argmax()))
            if ids[-1] == tok.eos:
                break
        print("sample: " + tok.decode(ids), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
