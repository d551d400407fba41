"""Flax workloads (nnx and linen): models trained (or run) the way users
write them, at small sizes."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload


# -- nnx GPT ------------------------------------------------------------------


def _gpt(vocab, seq, dim, heads, layers):
  from flax import nnx  # pylint: disable=g-import-not-at-top

  class Block(nnx.Module):

    def __init__(self, rngs):
      self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
      self.attn = nnx.MultiHeadAttention(heads, dim, decode=False, rngs=rngs)
      self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
      self.fc1 = nnx.Linear(dim, 4 * dim, rngs=rngs)
      self.fc2 = nnx.Linear(4 * dim, dim, rngs=rngs)

    def __call__(self, x, mask):
      x = x + self.attn(self.ln1(x), mask=mask)
      return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))

  class GPT(nnx.Module):

    def __init__(self, rngs):
      self.tok = nnx.Embed(vocab, dim, rngs=rngs)
      self.pos = nnx.Embed(seq, dim, rngs=rngs)
      self.blocks = nnx.List([Block(rngs) for _ in range(layers)])
      self.ln = nnx.LayerNorm(dim, rngs=rngs)
      self.head = nnx.Linear(dim, vocab, use_bias=False, rngs=rngs)

    def __call__(self, tokens):
      t = tokens.shape[1]
      x = self.tok(tokens) + self.pos(jnp.arange(t))[None]
      mask = nnx.make_causal_mask(tokens)
      for block in self.blocks:
        x = block(x, mask)
      return self.head(self.ln(x))

  return GPT


@workload("flax")
def flax_nnx_gpt_train():
  """nnx GPT LM (2 blocks, d=64, 4 heads, seq 32) train step, optax.adamw."""
  import optax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  vocab, seq, batch = 128, 32, 8
  GPT = _gpt(vocab, seq, 64, 4, 2)

  @nnx.jit
  def train_step(model, opt, tokens):
    def loss_fn(model):
      logits = model(tokens[:, :-1])
      return optax.softmax_cross_entropy_with_integer_labels(
          logits, tokens[:, 1:]).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss

  def init(seed):
    model = GPT(nnx.Rngs(seed))
    opt = nnx.Optimizer(model, optax.adamw(1e-3, weight_decay=0.01),
                        wrt=nnx.Param)
    tokens = jax.random.randint(jax.random.key(seed + 1), (batch, seq + 1), 0,
                                vocab)
    return model, opt, tokens

  def step(state):
    model, opt, tokens = state
    loss = train_step(model, opt, tokens)
    return state, {"loss": loss, "head": model.head.kernel[...]}

  return init, step


# -- nnx ViT ------------------------------------------------------------------


@workload("flax")
def flax_nnx_vit_forward():
  """nnx ViT (4x4 patches of 32x32x3, 2 blocks, d=64) forward pass."""
  from flax import nnx  # pylint: disable=g-import-not-at-top
  dim, heads, classes, batch = 64, 4, 10, 16

  class Block(nnx.Module):

    def __init__(self, rngs):
      self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
      self.attn = nnx.MultiHeadAttention(heads, dim, decode=False, rngs=rngs)
      self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
      self.mlp1 = nnx.Linear(dim, 2 * dim, rngs=rngs)
      self.mlp2 = nnx.Linear(2 * dim, dim, rngs=rngs)

    def __call__(self, x):
      x = x + self.attn(self.ln1(x))
      return x + self.mlp2(nnx.gelu(self.mlp1(self.ln2(x))))

  class ViT(nnx.Module):

    def __init__(self, rngs):
      self.patch = nnx.Conv(3, dim, (4, 4), strides=(4, 4), rngs=rngs)
      self.cls = nnx.Param(jnp.zeros((1, 1, dim)))
      self.pos = nnx.Param(0.02 * jax.random.normal(rngs.params(), (1, 65, dim)))
      self.blocks = nnx.List([Block(rngs) for _ in range(2)])
      self.ln = nnx.LayerNorm(dim, rngs=rngs)
      self.head = nnx.Linear(dim, classes, rngs=rngs)

    def __call__(self, images):
      x = self.patch(images)
      x = x.reshape(x.shape[0], -1, dim)
      cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, dim))
      x = jnp.concatenate([cls, x], axis=1) + self.pos[...]
      for block in self.blocks:
        x = block(x)
      return self.head(self.ln(x[:, 0]))

  @nnx.jit
  def forward(model, images):
    return jax.nn.log_softmax(model(images))

  def init(seed):
    model = ViT(nnx.Rngs(seed))
    images = jax.random.normal(jax.random.key(seed + 1), (batch, 32, 32, 3))
    return model, images

  def step(state):
    model, images = state
    return state, {"log_probs": forward(model, images)}

  return init, step


# -- linen ResNet with BatchNorm ------------------------------------------------


@workload("flax")
def flax_linen_resnet_bn_train():
  """linen ResNet (2 stages x 2 blocks, BatchNorm) train step with batch
  stats, optax.sgd with momentum."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  batch, classes = 16, 10

  class ResBlock(nn.Module):
    features: int
    strides: int = 1

    @nn.compact
    def __call__(self, x, train):
      norm = lambda: nn.BatchNorm(use_running_average=not train, momentum=0.9)
      y = nn.Conv(self.features, (3, 3), (self.strides,) * 2, use_bias=False)(x)
      y = nn.relu(norm()(y))
      y = nn.Conv(self.features, (3, 3), use_bias=False)(y)
      y = norm()(y)
      if x.shape != y.shape:
        x = nn.Conv(self.features, (1, 1), (self.strides,) * 2,
                    use_bias=False)(x)
        x = norm()(x)
      return nn.relu(x + y)

  class ResNet(nn.Module):

    @nn.compact
    def __call__(self, x, train=True):
      x = nn.Conv(16, (3, 3), use_bias=False)(x)
      x = nn.relu(nn.BatchNorm(use_running_average=not train)(x))
      for i, features in enumerate((16, 32)):
        for j in range(2):
          x = ResBlock(features, 2 if (i > 0 and j == 0) else 1)(x, train)
      x = jnp.mean(x, axis=(1, 2))
      return nn.Dense(classes)(x)

  model = ResNet()
  tx = optax.sgd(0.05, momentum=0.9)

  @jax.jit
  def train_step(params, batch_stats, opt_state, images, labels):
    def loss_fn(params):
      logits, updates = model.apply(
          {"params": params, "batch_stats": batch_stats}, images,
          mutable=["batch_stats"])
      loss = optax.softmax_cross_entropy_with_integer_labels(
          logits, labels).mean()
      return loss, updates["batch_stats"]
    (loss, new_stats), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), new_stats, opt_state, loss

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    images = jax.random.normal(k1, (batch, 16, 16, 3))
    labels = jax.random.randint(k2, (batch,), 0, classes)
    variables = jax.jit(lambda k: model.init(k, images))(k3)
    params, stats = variables["params"], variables["batch_stats"]
    return params, stats, tx.init(params), images, labels

  def step(state):
    params, stats, opt_state, images, labels = state
    params, stats, opt_state, loss = train_step(params, stats, opt_state,
                                                images, labels)
    return ((params, stats, opt_state, images, labels),
            {"loss": loss, "batch_stats": stats})

  return init, step


# -- nnx VAE --------------------------------------------------------------------


@workload("flax")
def flax_nnx_vae_train():
  """nnx MLP VAE (64-32-8 latent) train step: reparameterisation with a
  per-step key, ELBO, optax.adam."""
  import optax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  dim, hidden, latent, batch = 64, 32, 8, 32

  class VAE(nnx.Module):

    def __init__(self, rngs):
      self.enc = nnx.Linear(dim, hidden, rngs=rngs)
      self.mu = nnx.Linear(hidden, latent, rngs=rngs)
      self.logvar = nnx.Linear(hidden, latent, rngs=rngs)
      self.dec1 = nnx.Linear(latent, hidden, rngs=rngs)
      self.dec2 = nnx.Linear(hidden, dim, rngs=rngs)

    def __call__(self, x, key):
      h = nnx.relu(self.enc(x))
      mu, logvar = self.mu(h), self.logvar(h)
      z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape)
      logits = self.dec2(nnx.relu(self.dec1(z)))
      return logits, mu, logvar

  @nnx.jit
  def train_step(model, opt, x, key):
    def loss_fn(model):
      logits, mu, logvar = model(x, key)
      rec = optax.sigmoid_binary_cross_entropy(logits, x).sum(-1)
      kl = -0.5 * jnp.sum(1 + logvar - mu ** 2 - jnp.exp(logvar), -1)
      return jnp.mean(rec + kl)
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss

  def init(seed):
    model = VAE(nnx.Rngs(seed))
    opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    x = jax.random.bernoulli(jax.random.key(seed + 1), 0.3,
                             (batch, dim)).astype(jnp.float32)
    return [model, opt, x, jax.random.key(seed + 2)]

  def step(state):
    model, opt, x, key = state
    key, sub = jax.random.split(key)
    loss = train_step(model, opt, x, sub)
    state[3] = key
    return state, {"loss": loss}

  return init, step


# -- linen U-Net diffusion --------------------------------------------------------


@workload("flax")
def flax_linen_unet_diffusion_train():
  """linen U-Net (16x16x1, one down/up level, time embedding) DDPM
  noise-prediction train step, optax.adam."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  batch, steps_t = 8, 100
  betas = jnp.linspace(1e-4, 0.02, steps_t)
  alpha_bar = jnp.cumprod(1.0 - betas)

  def time_embedding(t, dim):
    freqs = jnp.exp(-jnp.log(1000.0) * jnp.arange(dim // 2) / (dim // 2))
    args = t[:, None].astype(jnp.float32) * freqs[None]
    return jnp.concatenate([jnp.sin(args), jnp.cos(args)], -1)

  class UNet(nn.Module):

    @nn.compact
    def __call__(self, x, t):
      temb = nn.Dense(32)(nn.swish(nn.Dense(32)(time_embedding(t, 16))))
      h1 = nn.swish(nn.GroupNorm(4)(nn.Conv(16, (3, 3))(x)))
      h2 = nn.Conv(32, (3, 3), strides=(2, 2))(h1)
      h2 = nn.swish(nn.GroupNorm(8)(h2 + temb[:, None, None, :]))
      h2 = nn.swish(nn.Conv(32, (3, 3))(h2))
      up = nn.ConvTranspose(16, (2, 2), strides=(2, 2))(h2)
      h = jnp.concatenate([up, h1], -1)
      h = nn.swish(nn.Conv(16, (3, 3))(h))
      return nn.Conv(1, (1, 1))(h)

  model = UNet()
  tx = optax.adam(2e-4)

  @jax.jit
  def train_step(params, opt_state, x0, key):
    kt, kn = jax.random.split(key)
    t = jax.random.randint(kt, (x0.shape[0],), 0, steps_t)
    noise = jax.random.normal(kn, x0.shape)
    ab = alpha_bar[t][:, None, None, None]
    xt = jnp.sqrt(ab) * x0 + jnp.sqrt(1 - ab) * noise

    def loss_fn(params):
      return jnp.mean((model.apply(params, xt, t) - noise) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    x0 = jnp.tanh(jax.random.normal(k1, (batch, 16, 16, 1)))
    params = jax.jit(model.init)(k2, x0, jnp.zeros((batch,), jnp.int32))
    return params, tx.init(params), x0, jax.random.key(seed + 1)

  def step(state):
    params, opt_state, x0, key = state
    key, sub = jax.random.split(key)
    params, opt_state, loss = train_step(params, opt_state, x0, sub)
    return (params, opt_state, x0, key), {"loss": loss}

  return init, step


# -- Recurrent ------------------------------------------------------------------


@workload("flax")
def flax_linen_lstm_train():
  """linen nn.RNN(OptimizedLSTMCell(32)) (a scan over 20 steps) sequence
  regression train step, optax.adam."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  batch, length, features = 8, 20, 8

  class Model(nn.Module):

    @nn.compact
    def __call__(self, x):
      h = nn.RNN(nn.OptimizedLSTMCell(32))(x)
      return nn.Dense(1)(h)[..., 0]

  model = Model()
  tx = optax.adam(1e-3)

  @jax.jit
  def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(
        lambda p: jnp.mean((model.apply(p, x) - y) ** 2))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(k1, (batch, length, features))
    y = jnp.cumsum(x[..., 0], axis=1) / jnp.sqrt(jnp.arange(1, length + 1))
    params = jax.jit(model.init)(k2, x)
    return params, tx.init(params), x, y

  def step(state):
    params, opt_state, x, y = state
    params, opt_state, loss = train_step(params, opt_state, x, y)
    return (params, opt_state, x, y), {"loss": loss}

  return init, step


@workload("flax")
def flax_nnx_gru_scan_train():
  """nnx GRUCell unrolled with jax.lax.scan over 20 steps, sequence
  classification train step, optax.adam."""
  import optax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  batch, length, features, hidden, classes = 8, 20, 8, 32, 4

  class Model(nnx.Module):

    def __init__(self, rngs):
      self.cell = nnx.GRUCell(features, hidden, rngs=rngs)
      self.head = nnx.Linear(hidden, classes, rngs=rngs)

    def __call__(self, x):
      carry = jnp.zeros((x.shape[0], hidden))
      graphdef, params = nnx.split(self.cell)

      def body(carry, xt):
        carry, _ = nnx.merge(graphdef, params)(carry, xt)
        return carry, None
      carry, _ = jax.lax.scan(body, carry, jnp.swapaxes(x, 0, 1))
      return self.head(carry)

  @nnx.jit
  def train_step(model, opt, x, labels):
    def loss_fn(model):
      return optax.softmax_cross_entropy_with_integer_labels(
          model(x), labels).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed + 1))
    model = Model(nnx.Rngs(seed))
    opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    x = jax.random.normal(k1, (batch, length, features))
    labels = jax.random.randint(k2, (batch,), 0, classes)
    return model, opt, x, labels

  def step(state):
    model, opt, x, labels = state
    return state, {"loss": train_step(model, opt, x, labels)}

  return init, step


# -- Graph network ----------------------------------------------------------------


@workload("flax")
def flax_nnx_graph_net_train():
  """nnx message-passing graph network (64 nodes, 256 edges, 2 rounds)
  aggregating with jax.ops.segment_sum; train step, optax.adam."""
  import optax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  nodes, edges, feat, hidden = 64, 256, 8, 32

  class GraphNet(nnx.Module):

    def __init__(self, rngs):
      self.embed = nnx.Linear(feat, hidden, rngs=rngs)
      self.edge_mlps = nnx.List(
          [nnx.Linear(2 * hidden, hidden, rngs=rngs) for _ in range(2)])
      self.node_mlps = nnx.List(
          [nnx.Linear(2 * hidden, hidden, rngs=rngs) for _ in range(2)])
      self.readout = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x, senders, receivers):
      h = nnx.relu(self.embed(x))
      for edge_mlp, node_mlp in zip(self.edge_mlps, self.node_mlps):
        msg = nnx.relu(edge_mlp(jnp.concatenate(
            [h[senders], h[receivers]], -1)))
        agg = jax.ops.segment_sum(msg, receivers, num_segments=nodes)
        h = h + nnx.relu(node_mlp(jnp.concatenate([h, agg], -1)))
      return self.readout(jnp.mean(h, axis=0))[0]

  @nnx.jit
  def train_step(model, opt, x, senders, receivers, target):
    loss, grads = nnx.value_and_grad(
        lambda m: (m(x, senders, receivers) - target) ** 2)(model)
    opt.update(model, grads)
    return loss

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed + 1), 3)
    model = GraphNet(nnx.Rngs(seed))
    opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    x = jax.random.normal(k1, (nodes, feat))
    senders = jax.random.randint(k2, (edges,), 0, nodes)
    receivers = jax.random.randint(k3, (edges,), 0, nodes)
    return model, opt, x, senders, receivers, jnp.float32(1.5)

  def step(state):
    return state, {"loss": train_step(*state)}

  return init, step


# -- nnx mixed-precision CNN ------------------------------------------------------


@workload("flax")
def flax_nnx_cnn_bf16_train():
  """nnx CNN in mixed precision: float32 parameters, bfloat16 compute
  (`dtype=jnp.bfloat16`: three 3x3 convolutions, average pooling, a dense
  head), softmax cross-entropy in float32, SGD with momentum.

Both platforms round bfloat16 values in different places, so the weights
drift apart step by step (at a learning rate of 0.05, to 1.3e-3 of their
largest value after 12 steps; Adam's normalised steps drift faster); the
small learning rate keeps the compared weights well inside the float32
tolerance."""
  import optax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  batch, size, classes = 16, 32, 10
  dt = jnp.bfloat16

  class CNN(nnx.Module):

    def __init__(self, rngs):
      self.c1 = nnx.Conv(3, 32, (3, 3), dtype=dt, rngs=rngs)
      self.c2 = nnx.Conv(32, 64, (3, 3), dtype=dt, rngs=rngs)
      self.c3 = nnx.Conv(64, 64, (3, 3), dtype=dt, rngs=rngs)
      self.head = nnx.Linear(64, classes, dtype=dt, rngs=rngs)

    def __call__(self, x):
      x = nnx.avg_pool(nnx.relu(self.c1(x)), (2, 2), (2, 2))
      x = nnx.avg_pool(nnx.relu(self.c2(x)), (2, 2), (2, 2))
      x = nnx.relu(self.c3(x)).mean((1, 2))
      return self.head(x).astype(jnp.float32)

  @nnx.jit
  def train_step(model, opt, x, y):
    def loss_fn(model):
      return optax.softmax_cross_entropy_with_integer_labels(model(x),
                                                             y).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    opt.update(model, grads)
    return loss

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed + 1))
    model = CNN(nnx.Rngs(seed))
    opt = nnx.Optimizer(model, optax.sgd(0.01, momentum=0.9),
                        wrt=nnx.Param)
    x = jax.random.normal(k1, (batch, size, size, 3))
    y = jax.random.randint(k2, (batch,), 0, classes)
    return model, opt, x, y

  def step(state):
    model = state[0]
    loss = train_step(*state)
    return state, {"loss": loss, "head": model.head.kernel.value}

  return init, step
