"""The tiny GPT's sampling path near the speed of its matrices: the loop :func:`attn_core.nn.
generate` and the GPT explorer run.

The tiny GPT's matrices are small (d_model 64, 4 heads, 2 layers): a decoding step is a
few microseconds of arithmetic and, through :func:`attn_core.nn.forward_cached`, about 4 ms
of everything else (the checks of every argument and intermediate product, an immutable
:class:`~attn_core.decoding.KVCache` copied at every token, the block's general options
looked up). Its positions are learned, ``n_ctx`` of them: once the text fills the window,
every new character crops it and recomputes the whole window (a prefill of ``n_ctx``
tokens), so most of a 200-character sample is prefills. :class:`GPTDecoder` computes the
same logits with the checks done once, at the public boundary (:func:`attn_core.nn.generate`
checks the arguments, the explorer checks the parameters once; each step's logits are
checked once):

* the keys and values go into buffers allocated once per text and written in place (no
  copy of the cache, no concatenation);
* the query, key and value matrices of a block are one ``(d_model, 3 d_model)`` matrix (one
  product), the causal mask one additive table made once;
* a prefill's last block computes the keys and values of every position but the attention
  and the MLP of the last one only: a generation draws from the last position's logits;
* the first block's queries, keys and values depend only on a token and its position: a
  token's rows at every position are computed once, the first time a full window holds it
  (one product of the window's shape: the same numbers, bit for bit), and kept by the engine
  (:func:`fast_engine`) for every later window and text (issue 47: most of a sample is full
  windows of the same characters, each one position further on);
* the layer norms are :func:`attn_core.nn.layer_norm`'s arithmetic, in place (the same
  numbers, without ``ndarray.mean``'s wrapper); the MLP is the course's own
  (:mod:`attn_core.nn.mlp`, its GELU :mod:`attn_core.nn.gelu`), unchecked halves.

It serves the tiny GPT's blocks (layer norm, GELU MLP or none, biases, one key/value head per
query head, learned positions, softmax attention; :func:`supports`); SmolLM2's decoder is
:class:`attn_core.model.llm_fast.LLMDecoder`. Tested against :func:`attn_core.nn.prefill`,
:func:`attn_core.nn.forward_cached` and a full recompute (``tests/test_gpt_decoder.py``).

Public API
----------
* :class:`GPTDecoder` -- ``start(ids)`` then ``step(token)``, each returning the next
  token's logits
* :func:`fast_engine` -- the engine :func:`attn_core.nn.generate.sample_loop` takes
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .._validate import check_result, checked_later
from .block_options import BlockOptions
from .mlp import _mlp_parts

__all__ = ["DecoderWeights", "GPTDecoder", "fast_engine"]

#: A block's parameters, in the order of :attr:`GPTDecoder.layers`' tuples (the query, key and
#: value matrices and biases stacked into ``w_qkv``, ``b_qkv``).
_NORM1, _ATTN_OUT = ("ln1.g", "ln1.b"), ("attn.w_o", "attn.b_o")
_MLP = ("ln2.g", "ln2.b", "mlp.w_in", "mlp.b_in", "mlp.w_out", "mlp.b_out")


def supports(config):
    """True when ``config``'s blocks are the ones :class:`GPTDecoder` serves: GPT-2's (layer
    norm, biases, one key/value head per query head, no rotary positions, softmax) in every
    layer, with a GELU MLP or none (attention-only), and learned positions."""
    if hasattr(config, "layer_options") and hasattr(config, "n_layers"):  # a mixer per layer
        options = [config.layer_options(i) for i in range(config.n_layers)]
    else:
        options = [getattr(config, "block_options", None)]
    return all(isinstance(o, BlockOptions) and o.mlp in ("gelu", None)
               and o == BlockOptions(o.n_heads, mlp=o.mlp, eps=o.eps) for o in options)


def fast_engine(params, config):
    """The ``engine`` of :func:`attn_core.nn.generate.sample_loop` for this model:
    :class:`GPTDecoder` when it serves ``config`` (and the positions are learned), else None
    (the readable :class:`attn_core.nn.generate.CachedEngine`). Every decoder it makes shares
    one :class:`DecoderWeights` (the stacked matrices and the first block's rows kept)."""
    if supports(config) and "wpe" in params:
        return partial(GPTDecoder, params, config, weights=DecoderWeights(params, config))
    return None


def _norm(x, gamma, beta, eps):
    """Layer norm of the rows ``x`` (..., d): :func:`attn_core.nn.layer_norm`'s operations in
    its order (the mean a sum divided by d, as ``ndarray.mean`` computes it), the temporaries
    written in place. Returns a new (..., d) array."""
    d = x.shape[-1]
    mu = np.add.reduce(x, axis=-1, keepdims=True)
    mu /= d
    xc = x - mu  # (..., d)
    var = np.add.reduce(xc * xc, axis=-1, keepdims=True)
    var /= d
    var += eps
    xc /= np.sqrt(var, out=var)
    xc *= gamma
    xc += beta
    return xc


class DecoderWeights:
    """A tiny GPT's weights as :class:`GPTDecoder` reads them, shared by every text decoded.

    ``layers``: per block, its parameters with the query, key and value matrices stacked;
    ``first_qkv(ids)``: the first block's ``LN1(wte[t] + wpe[p]) W_qkv + b_qkv`` of each token
    ``t = ids[p]`` of a full window, each token's rows made once and then kept
    (``vocab x n_ctx x 3 d_model`` numbers at most: 4 MB for the course's model).
    """

    def __init__(self, params, config):
        o = config.block_options
        self.n_heads, self.d_model = o.n_heads, config.d_model
        self.eps, self.mlp = o.eps, o.mlp is not None
        self.wte, self.wpe = params["wte"], params["wpe"]  # (vocab, d), (n_ctx, d)
        self.w_unembed = params["w_unembed"]  # (d, vocab)
        self.norm_f = (params["ln_f.g"], params["ln_f.b"])
        self.layers = []
        for i in range(config.n_layers):
            p = {k[len(f"h{i}."):]: a for k, a in params.items() if k.startswith(f"h{i}.")}
            w_qkv = np.concatenate([p[f"attn.w_{c}"] for c in "qkv"], axis=1)  # (d, 3d)
            b_qkv = np.concatenate([p[f"attn.b_{c}"] for c in "qkv"])  # (3d,)
            self.layers.append((*(p[k] for k in _NORM1), w_qkv, b_qkv,
                                *(p[k] for k in _ATTN_OUT),
                                *((p[k] for k in _MLP) if self.mlp else ())))
        vocab, n_ctx = self.wte.shape[0], self.wpe.shape[0]
        self._rows = np.empty((vocab, n_ctx, 3 * self.d_model), self.wte.dtype)
        self._known = np.zeros(vocab, dtype=bool)  # tokens whose rows are made

    def first_qkv(self, ids):
        """The first block's q, k and v of a full window ``ids`` (n_ctx,) at positions
        0..n_ctx-1: (n_ctx, 3 d_model); None for a shorter window (computed as any block's).

        A token's rows at every position are one product of the window's shape, the first
        time the token is in a full window: each row is then the same number, bit for bit, as
        the window's own product gives it (a product of another shape may round otherwise).
        """
        n_ctx = len(self.wpe)
        if len(ids) != n_ctx:
            return None
        new = () if self._known[ids].all() else [
            t for t in np.unique(ids).tolist() if not self._known[t]]
        g1, b1, w_qkv, b_qkv = self.layers[0][:4]
        for t in new:  # (n_ctx, d) @ (d, 3d), as a window of n_ctx tokens
            rows = _norm(self.wte[t] + self.wpe, g1, b1, self.eps) @ w_qkv
            rows += b_qkv
            self._rows[t] = rows
            self._known[t] = True
        return self._rows[ids, np.arange(n_ctx)]


class GPTDecoder:
    """One text's decoding state: preallocated key/value buffers and the blocks' weights.

    Parameters
    ----------
    params, config
        A checked tiny GPT (:func:`attn_core.nn.gpt.check_params`) whose blocks
        :func:`supports` serves; this class does not check them again (its callers do,
        once).
    capacity : int
        The most tokens the window will hold, ``<= config.n_ctx``: the buffers' length.
    weights : DecoderWeights, optional
        The model's weights as read here, shared with other decoders of the same model
        (:func:`fast_engine`'s); made from ``params`` when None.

    Notes
    -----
    ``start(ids)`` runs the window (n,) from empty buffers and returns the logits (vocab,)
    after its last token; ``step(token)`` appends one token and returns the logits after
    it. Both equal the last row of :func:`attn_core.nn.prefill` /
    :func:`attn_core.nn.forward_cached`'s logits up to float rounding (the products run in
    another order).
    """

    def __init__(self, params, config, capacity, weights=None):
        w = DecoderWeights(params, config) if weights is None else weights
        self.weights = w
        self.n_heads, self.d_model = w.n_heads, w.d_model
        self.d_head = w.d_model // w.n_heads
        self.eps, self.mlp = w.eps, w.mlp
        self.wte, self.wpe, self.w_unembed, self.norm_f = w.wte, w.wpe, w.w_unembed, w.norm_f
        self.layers = w.layers
        dtype = self.wte.dtype
        self.scale = dtype.type(1 / np.sqrt(self.d_head))
        # (capacity, capacity): 0 where query i may see key j (j <= i), -inf above
        self.causal = np.triu(np.full((capacity, capacity), -np.inf, dtype), k=1)
        shape = (config.n_layers, self.n_heads, capacity, self.d_head)
        self.keys, self.values = np.empty(shape, dtype), np.empty(shape, dtype)
        self.capacity, self.length = capacity, 0

    def _attend(self, q, i, n, mask):
        """Each head's output ``(m, d_model)`` of the queries ``q`` (m, d_model) over the
        first ``n`` keys and values of block ``i`` (``mask`` (m, n) added to the scores, or
        None)."""
        h, dh = self.n_heads, self.d_head
        m = q.shape[0]
        # (h, m, dh) @ (h, dh, n) -> (h, m, n)
        s = np.matmul(q.reshape(m, h, dh).swapaxes(0, 1), self.keys[i, :, :n].swapaxes(1, 2))
        s *= self.scale
        if mask is not None:
            s += mask
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s *= 1 / s.sum(axis=-1, keepdims=True)
        heads = np.matmul(s, self.values[i, :, :n])  # (h, m, n) @ (h, n, dh) -> (h, m, dh)
        return heads.swapaxes(0, 1).reshape(m, h * dh)  # heads side by side, in order

    def _block(self, x, i, start, last_only, qkv=None):
        """Block ``i`` on the rows ``x`` (m, d) at positions ``start .. start + m - 1``: their
        keys and values written to the buffers, then attention and the MLP (of the last row
        only when ``last_only``). ``qkv`` (m, 3d): their queries, keys and values, when
        known (the first block's, :meth:`DecoderWeights.first_qkv`)."""
        g1, b1, w_qkv, b_qkv, w_o, b_o, *mlp = self.layers[i]
        m, d = x.shape
        if qkv is None:
            qkv = _norm(x, g1, b1, self.eps) @ w_qkv  # (m, d) @ (d, 3d)
            qkv += b_qkv
        end = start + m
        h, dh = self.n_heads, self.d_head
        self.keys[i, :, start:end] = qkv[:, d:2 * d].reshape(m, h, dh).swapaxes(0, 1)
        self.values[i, :, start:end] = qkv[:, 2 * d:].reshape(m, h, dh).swapaxes(0, 1)
        rows = slice(m - 1, m) if last_only else slice(None)
        mask = None if m == 1 or last_only else self.causal[start:end, :end]
        x = x[rows] + self._attend(qkv[rows, :d], i, end, mask) @ w_o  # (m', d)
        x += b_o
        if mlp:
            g2, b2, *w = mlp
            x += _mlp_parts(_norm(x, g2, b2, self.eps), *w)[0]
        return x

    def _logits(self, x):
        """The logits (vocab,) of the last row of the stream ``x`` (m, d), checked."""
        y = _norm(x[-1], *self.norm_f, self.eps)  # (d,)
        logits = y @ self.w_unembed  # (d,) @ (d, vocab) -> (vocab,)
        check_result(logits, "the logits")
        return logits

    def start(self, ids):
        """The window ``ids`` (n,), ``1 <= n <= capacity``, through every block from empty
        buffers; returns the logits (vocab,) after its last token."""
        ids = np.asarray(ids)
        n = len(ids)
        x = self.wte[ids] + self.wpe[:n]  # (n, d)
        with checked_later():  # the logits are checked at the end
            for i in range(len(self.layers)):
                x = self._block(x, i, 0, last_only=i == len(self.layers) - 1,
                                qkv=None if i else self.weights.first_qkv(ids))
            logits = self._logits(x)
        self.length = n
        return logits

    def step(self, token):
        """One new token (an int id) after the ``length`` tokens in the buffers; returns the
        logits (vocab,) after it."""
        t = self.length
        if t >= self.capacity:
            raise ValueError(f"the decoder's buffers hold {self.capacity} tokens and are full:"
                             " start again with a cropped window")
        x = (self.wte[token] + self.wpe[t])[None]  # (1, d)
        with checked_later():
            for i in range(len(self.layers)):
                x = self._block(x, i, t, last_only=False)
            logits = self._logits(x)
        self.length = t + 1
        return logits
