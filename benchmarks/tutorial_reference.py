"""Reference baseline: the PyTorch "NLP From Scratch: Translation with a Sequence
to Sequence Network and Attention" tutorial (current, batched version),
re-implemented and applied to a toy task ("reverse a digit string").

What is kept faithful to the tutorial
-------------------------------------
* ``EncoderRNN``: ``Embedding(V, H)`` -> ``Dropout(0.1)`` -> ``GRU(H, H, batch_first=True)``.
* ``BahdanauAttention``: ``Wa = Linear(H, H)``, ``Ua = Linear(H, H)``, ``Va = Linear(H, 1)``;
  ``scores = Va(tanh(Wa(query) + Ua(keys)))``, softmax over source positions, context
  = ``bmm(weights, keys)``.  ``Ua(keys)`` is recomputed at *every* decoder step,
  exactly as in the tutorial (no caching of the key projection).
* ``AttnDecoderRNN``: ``Embedding(V, H)`` -> ``Dropout(0.1)``; query = decoder hidden
  state; GRU input = ``cat(embedded, context)`` (``GRU(2H, H, batch_first=True)``);
  ``out = Linear(H, V)``; the decoder always runs a fixed ``MAX_LENGTH`` steps, and
  ``log_softmax`` is applied to the concatenated outputs.  With a target it uses
  full teacher forcing (``decoder_input = target_tensor[:, i]``); without one it
  feeds back its own argmax (greedy).
* Hidden size 128, batch size 32, two ``Adam(lr=1e-3)`` optimizers (one for the
  encoder, one for the decoder, as in the tutorial), ``NLLLoss`` on the
  flattened ``(B*MAX_LENGTH, V)`` log-probabilities, no gradient clipping.
* Vocabulary: ``SOS_token = 0``, ``EOS_token = 1`` (then the ten digits).
  EOS is appended to both source and target, and both are right-padded with
  zeros to ``MAX_LENGTH`` (``np.zeros((n, MAX_LENGTH))`` in ``get_dataloader``),
  i.e. padding reuses index 0 (the SOS index).  Nothing is masked: the encoder
  runs over the padding, attention attends to padded positions, and the loss
  covers every one of the ``MAX_LENGTH`` positions including the padding
  (``NLLLoss`` has no ``ignore_index`` in the tutorial).
* Greedy evaluation: argmax at each of ``MAX_LENGTH`` steps, output cut at the
  first EOS (as the tutorial's ``evaluate``).

Deviations
----------
* Data: the toy task "reverse a digit string" instead of eng-fra translation.
  Source = random digits (length uniform in ``[min_len, max_len]``), target = the
  reversed digits.  ``MAX_LENGTH = max_len + 1`` (digits + EOS) rather than the
  tutorial's 10.  A fresh random batch is drawn every step from a seeded numpy
  RNG instead of epochs over a fixed DataLoader.
* Evaluation is batched and the held-out sources are padded to ``MAX_LENGTH``
  exactly as in training (the tutorial's ``evaluate`` feeds one *unpadded*
  sentence at a time, a train/eval mismatch we do not reproduce; padded eval is
  the more favourable choice for the baseline).  Exact match requires the
  decoded tokens up to and including the first EOS to equal ``reversed + EOS``.
  The held-out set (500 sequences) is drawn from its own fixed RNG
  (``eval_seed``), independent of the training seed; it is not filtered out of
  the training stream (overlap is negligible for lengths >= 5).
* Accounting: ``seconds`` is training wall time only; the clock is paused while
  evaluating.  Training stops as soon as an evaluation reaches
  ``target_accuracy`` or the training time exceeds ``max_seconds``.

CLI::

    python benchmarks/tutorial_reference.py --min-len 5 --max-len 15 --max-seconds 60 --seed 0
    python benchmarks/tutorial_reference.py --throughput --batches 30
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

SOS_token = 0
EOS_token = 1
N_DIGITS = 10
VOCAB_SIZE = 2 + N_DIGITS  # SOS, EOS, digits 0-9 -> indices 2..11
HIDDEN_SIZE = 128
BATCH_SIZE = 32
LEARNING_RATE = 1e-3
DROPOUT_P = 0.1
EVAL_SIZE = 500


# --------------------------------------------------------------------------
# Model (as in the tutorial)
# --------------------------------------------------------------------------


class EncoderRNN(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, dropout_p: float = DROPOUT_P):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        # Ua(keys) is recomputed on every call, i.e. every decoder step.
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size: int, output_size: int, max_length: int, dropout_p: float = DROPOUT_P):
        super().__init__()
        self.max_length = max_length
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long, device=encoder_outputs.device).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []

        for i in range(self.max_length):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)

            if target_tensor is not None:
                # Teacher forcing: feed the target as the next input
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                # Greedy: feed back its own prediction
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()

        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


# --------------------------------------------------------------------------
# Toy data: reverse a digit string
# --------------------------------------------------------------------------


def make_batch(rng: np.random.Generator, n: int, min_len: int, max_len: int):
    """Return (input_ids, target_ids) LongTensors of shape (n, max_len + 1).

    Digits d are encoded as index d + 2; EOS is appended; the rest is zero
    padding (index 0, as in the tutorial's ``get_dataloader``).
    """
    max_length = max_len + 1
    lengths = rng.integers(min_len, max_len + 1, size=n)
    digits = rng.integers(0, N_DIGITS, size=(n, max_len)) + 2
    input_ids = np.zeros((n, max_length), dtype=np.int64)
    target_ids = np.zeros((n, max_length), dtype=np.int64)
    for k in range(n):
        L = int(lengths[k])
        seq = digits[k, :L]
        input_ids[k, :L] = seq
        input_ids[k, L] = EOS_token
        target_ids[k, :L] = seq[::-1]
        target_ids[k, L] = EOS_token
    return torch.from_numpy(input_ids), torch.from_numpy(target_ids)


def build_models(max_len: int):
    max_length = max_len + 1
    encoder = EncoderRNN(VOCAB_SIZE, HIDDEN_SIZE)
    decoder = AttnDecoderRNN(HIDDEN_SIZE, VOCAB_SIZE, max_length)
    return encoder, decoder


def train_step(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion) -> float:
    """One step of the tutorial's ``train_epoch`` inner loop."""
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()

    encoder_outputs, encoder_hidden = encoder(input_tensor)
    decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)

    loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
    loss.backward()

    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item()


def _first_eos_cut(row: list[int]) -> tuple[int, ...] | None:
    """Tokens up to and including the first EOS, or None if no EOS."""
    try:
        i = row.index(EOS_token)
    except ValueError:
        return None
    return tuple(row[: i + 1])


@torch.no_grad()
def exact_match_accuracy(encoder, decoder, input_ids, target_ids, batch_size: int = 250) -> float:
    was_training = encoder.training, decoder.training
    encoder.eval()
    decoder.eval()
    correct = 0
    try:
        for s in range(0, input_ids.size(0), batch_size):
            inp = input_ids[s : s + batch_size]
            tgt = target_ids[s : s + batch_size]
            encoder_outputs, encoder_hidden = encoder(inp)
            decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden)
            pred = decoder_outputs.argmax(-1).tolist()
            for p, t in zip(pred, tgt.tolist()):
                if _first_eos_cut(p) == _first_eos_cut(t):
                    correct += 1
    finally:
        encoder.train(was_training[0])
        decoder.train(was_training[1])
    return correct / input_ids.size(0)


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


@dataclass
class ReferenceResult:
    reached: bool  # reached target exact-match accuracy
    seconds: float  # training wall seconds until reached (or until the budget ran out)
    examples: int  # training sequences seen
    sequences_per_second: float  # examples / training seconds (evaluation excluded)
    final_accuracy: float
    history: list[tuple[int, float, float]] = field(default_factory=list)  # (examples, seconds, accuracy)


def _seed_everything(seed: int) -> np.random.Generator:
    random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def train_reference(
    min_len: int = 5,
    max_len: int = 15,
    target_accuracy: float = 0.99,
    max_seconds: float = 120.0,
    seed: int = 0,
    eval_every_examples: int = 3200,
    threads: int | None = None,
    *,
    eval_seed: int = 1234,
    verbose: bool = False,
) -> ReferenceResult:
    """Train the tutorial model on digit reversal until ``target_accuracy``
    exact-match on a fixed held-out set of 500, or until ``max_seconds`` of
    training time (evaluation time excluded) have elapsed."""
    if threads is not None:
        torch.set_num_threads(threads)
    if not 1 <= min_len <= max_len:
        raise ValueError("need 1 <= min_len <= max_len")

    eval_inputs, eval_targets = make_batch(np.random.default_rng(eval_seed), EVAL_SIZE, min_len, max_len)

    rng = _seed_everything(seed)
    encoder, decoder = build_models(max_len)
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=LEARNING_RATE)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=LEARNING_RATE)
    criterion = nn.NLLLoss()
    encoder.train()
    decoder.train()

    examples = 0
    train_seconds = 0.0
    next_eval = eval_every_examples
    history: list[tuple[int, float, float]] = []
    accuracy = 0.0
    reached = False
    loss_sum, loss_n = 0.0, 0

    while True:
        t0 = time.perf_counter()
        input_tensor, target_tensor = make_batch(rng, BATCH_SIZE, min_len, max_len)
        loss_sum += train_step(
            input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion
        )
        loss_n += 1
        train_seconds += time.perf_counter() - t0
        examples += BATCH_SIZE

        out_of_time = train_seconds >= max_seconds
        if examples >= next_eval or out_of_time:
            next_eval += eval_every_examples
            accuracy = exact_match_accuracy(encoder, decoder, eval_inputs, eval_targets)  # clock paused
            history.append((examples, train_seconds, accuracy))
            if verbose:
                print(
                    f"examples={examples:7d}  train_s={train_seconds:7.1f}  "
                    f"loss={loss_sum / max(loss_n, 1):.4f}  acc={accuracy:.3f}  "
                    f"seq/s={examples / train_seconds:.0f}",
                    flush=True,
                )
            loss_sum, loss_n = 0.0, 0
            if accuracy >= target_accuracy:
                reached = True
                break
            if out_of_time:
                break

    return ReferenceResult(
        reached=reached,
        seconds=train_seconds,
        examples=examples,
        sequences_per_second=examples / train_seconds if train_seconds > 0 else 0.0,
        final_accuracy=accuracy,
        history=history,
    )


def throughput_reference(
    min_len: int = 5,
    max_len: int = 15,
    batches: int = 30,
    seed: int = 0,
    threads: int | None = None,
) -> float:
    """Training sequences/s over ``batches`` steps, after 3 warm-up steps."""
    if threads is not None:
        torch.set_num_threads(threads)
    rng = _seed_everything(seed)
    encoder, decoder = build_models(max_len)
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=LEARNING_RATE)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=LEARNING_RATE)
    criterion = nn.NLLLoss()
    encoder.train()
    decoder.train()

    def step():
        inp, tgt = make_batch(rng, BATCH_SIZE, min_len, max_len)
        train_step(inp, tgt, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(batches):
        step()
    elapsed = time.perf_counter() - t0
    return batches * BATCH_SIZE / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-len", type=int, default=5)
    ap.add_argument("--max-len", type=int, default=15)
    ap.add_argument("--target-accuracy", type=float, default=0.99)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every-examples", type=int, default=3200)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--throughput", action="store_true", help="only measure training throughput")
    ap.add_argument("--batches", type=int, default=30, help="batches timed by --throughput")
    args = ap.parse_args(argv)

    print(
        f"tutorial reference: reverse digits, len {args.min_len}-{args.max_len}, "
        f"hidden {HIDDEN_SIZE}, batch {BATCH_SIZE}, threads {args.threads or torch.get_num_threads()}",
        flush=True,
    )
    if args.throughput:
        sps = throughput_reference(args.min_len, args.max_len, args.batches, args.seed, threads=args.threads)
        print(json.dumps({"sequences_per_second": sps, "batches": args.batches, "batch_size": BATCH_SIZE}))
        return 0

    result = train_reference(
        min_len=args.min_len,
        max_len=args.max_len,
        target_accuracy=args.target_accuracy,
        max_seconds=args.max_seconds,
        seed=args.seed,
        eval_every_examples=args.eval_every_examples,
        threads=args.threads,
        verbose=True,
    )
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
