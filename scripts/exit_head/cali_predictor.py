"""The Cali-TS acceptance predictor θ_M of EESD (§3.3, eq. 5; App. B, Algorithm 3) and its training.

EESD eq. 5 predicts whether the draft's i-th token of a round will be accepted from the target
model's last hidden state at the round's root, H_t^(T), and the draft's last hidden state at the
drafted token, H_{t+i}^(D):

    θ_M^{t+i} = sigmoid(W_p [W^i H_t^(T), H_{t+i}^(D)]),   i = min(i, 10),

with one d×d matrix W^i per draft step (at most S = 10 of them) and W_p over the 2d concatenation,
trained by cross-entropy on sampled rows labelled by whether the target accepted the token.
Following the Cali-TS formats (section 2), W_p is read as one logistic output, a row vector w of
2d plus a bias b (the paper's 2-way softmax over "stop / go on" is the same model):

    θ_M = sigmoid(w[:d] · (W^i h_T) + w[d:] · h_D + b),   i = min(step, S),
    (W^i h)_r = Σ_c W[i-1, r, c] h_c.

Initialisation: every W^i is the identity, w is zero and b is the logit of the training rows'
acceptance rate, so the untrained predictor says the base rate everywhere. Loss: binary
cross-entropy (the paper's cross-entropy, for one logistic output), AdamW (weight decay on W^i and
w, not on b). The predictor has S·d² + 2d + 1 parameters, many for a few thousand rows, so the
epoch with the lowest held-out BCE (epoch 0, the untrained predictor, included) is kept. Its
held-out root-mean-square error against the 0/1 labels is σ_M, the predict error of eqs. 6-7.
"""

import dataclasses
import math

import numpy as np
import torch
import torch.nn.functional as F

from exit_head.safetensors_io import bf16_to_f32

kPredictorFormat = "selfspec-cali-predictor"
kPredictorVersion = 1
kEvalBatch = 4096


class CaliPredictor(torch.nn.Module):
    """θ_M of EESD eq. 5; forward() gives its logit."""

    def __init__(self, hidden_size, steps, bias=0.0):
        super().__init__()
        self.hidden_size, self.steps = hidden_size, steps
        self.step_transforms = torch.nn.Parameter(torch.eye(hidden_size).repeat(steps, 1, 1))
        self.weight = torch.nn.Parameter(torch.zeros(2 * hidden_size))
        self.bias = torch.nn.Parameter(torch.full((1,), float(bias)))

    def forward(self, target_hidden, draft_hidden, step):
        """Logits [B] for hidden states [B, d] (f32) and 1-based draft steps [B] (int64)."""
        d = self.hidden_size
        # w[:d] · (W^i h) = ((W^i)^T w[:d]) · h: one d-vector per step, not a d×d product per row.
        folded = torch.einsum("irc,r->ic", self.step_transforms, self.weight[:d])
        index = torch.clamp(step, max=self.steps) - 1
        return ((folded[index] * target_hidden).sum(-1) + draft_hidden @ self.weight[d:] +
                self.bias)

    def tensors(self):
        """{name: contiguous f32 numpy array} in the predictor format (section 2)."""
        return {"cali.step_transforms": _numpy(self.step_transforms),
                "cali.weight": _numpy(self.weight), "cali.bias": _numpy(self.bias)}


@dataclasses.dataclass(frozen=True)
class Metrics:
    """θ_M on a set of rows: mean BCE, accuracy of θ_M >= 0.5, RMSE of θ_M against the 0/1
    label, the fraction accepted, and the number of rows."""
    bce: float
    accuracy: float
    rmse: float
    base_rate: float
    rows: int


@dataclasses.dataclass(frozen=True)
class FitOptions:
    epochs: int
    lr: float
    weight_decay: float
    batch: int
    seed: int


@dataclasses.dataclass
class FitResult:
    """Per-epoch figures (epoch 0: before training), the kept epoch and its held-out Metrics."""
    history: list
    kept_epoch: int
    kept: Metrics


def initial_predictor(rows, train_index, hidden_size, steps):
    """The untrained predictor, its bias the logit of the train rows' acceptance rate (clipped
    to [1e-4, 1 - 1e-4] so that an all-accepted or all-rejected set gives a finite bias)."""
    rate = min(max(float(rows.accepted[train_index].mean()), 1e-4), 1.0 - 1e-4)
    return CaliPredictor(hidden_size, steps, bias=math.log(rate / (1.0 - rate)))


def batch_tensors(rows, index):
    """(target_hidden, draft_hidden, step, accepted) torch tensors of the rows `index`."""
    return (torch.from_numpy(bf16_to_f32(rows.target_hidden[index])),
            torch.from_numpy(bf16_to_f32(rows.draft_hidden[index])),
            torch.from_numpy(rows.step[index]), torch.from_numpy(rows.accepted[index]))


def predict_logits(model, rows, index):
    """float64 numpy logits of θ_M for the rows `index`, in that order."""
    parts = []
    with torch.no_grad():
        for begin in range(0, len(index), kEvalBatch):
            target, draft, step, _ = batch_tensors(rows, index[begin:begin + kEvalBatch])
            parts.append(model(target, draft, step).double().numpy())
    return np.concatenate(parts) if parts else np.zeros(0)


def metrics_of(logits, labels):
    """Metrics of float64 logits against 0/1 labels (BCE from the logits, for stability)."""
    labels = np.asarray(labels, dtype=np.float64)
    probability = 1.0 / (1.0 + np.exp(-logits))
    bce = np.logaddexp(0.0, logits) - labels * logits  # -log θ (label 1), -log(1 - θ) (label 0)
    return Metrics(bce=float(bce.mean()),
                   accuracy=float(((probability >= 0.5) == (labels == 1)).mean()),
                   rmse=float(np.sqrt(((probability - labels) ** 2).mean())),
                   base_rate=float(labels.mean()), rows=int(labels.shape[0]))


def evaluate(model, rows, index):
    """Metrics of the predictor on the rows `index`."""
    model.eval()
    return metrics_of(predict_logits(model, rows, index), rows.accepted[index])


def train_epoch(model, optimiser, rows, index, batch, rng):
    """One pass over the rows `index` in a random order, `batch` rows per AdamW step."""
    model.train()
    order = index[rng.permutation(len(index))]
    for begin in range(0, len(order), batch):
        target, draft, step, accepted = batch_tensors(rows, order[begin:begin + batch])
        optimiser.zero_grad()
        loss = F.binary_cross_entropy_with_logits(model(target, draft, step), accepted)
        loss.backward()
        optimiser.step()
    model.eval()


def fit(model, rows, split, options, log):
    """Trains `model` on split.train for options.epochs epochs, logging each epoch's figures,
    and leaves it at the epoch (0 = untrained) with the lowest held-out BCE."""
    optimiser = torch.optim.AdamW(
        [{"params": [model.step_transforms, model.weight], "weight_decay": options.weight_decay},
         {"params": [model.bias], "weight_decay": 0.0}], lr=options.lr)
    rng = np.random.default_rng(options.seed)
    history, best_state, best = [], None, None
    for epoch in range(options.epochs + 1):
        if epoch > 0:
            train_epoch(model, optimiser, rows, split.train, options.batch, rng)
        train, heldout = evaluate(model, rows, split.train), evaluate(model, rows, split.heldout)
        history.append({"epoch": epoch, "train_bce": train.bce, "heldout_bce": heldout.bce,
                        "heldout_accuracy": heldout.accuracy, "heldout_rmse": heldout.rmse})
        improved = best is None or heldout.bce < best[1].bce
        if improved:
            best = (epoch, heldout)
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        label = "before training" if epoch == 0 else f"epoch {epoch}/{options.epochs}"
        log(f"{label}: train BCE {train.bce:.4f}, held-out BCE {heldout.bce:.4f}, accuracy "
            f"{heldout.accuracy:.4f}, RMSE {heldout.rmse:.4f}" + (" (best)" if improved else ""))
    model.load_state_dict(best_state)
    return FitResult(history=history, kept_epoch=best[0], kept=best[1])


def predictor_metadata(manifest, result, train_rows):
    """The predictor file's __metadata__ (section 2): all values strings."""
    kept = result.kept
    return {"format": kPredictorFormat, "version": str(kPredictorVersion),
            "model_identity": manifest["model_identity"],
            "exit_layer": str(manifest["exit_layer"]),
            "hidden_size": str(manifest["hidden_size"]), "steps": str(manifest["steps"]),
            "sigma_m": f"{kept.rmse:.6f}", "heldout_accuracy": f"{kept.accuracy:.6f}",
            "heldout_bce": f"{kept.bce:.6f}", "base_rate": f"{kept.base_rate:.6f}",
            "train_rows": str(train_rows), "heldout_rows": str(kept.rows)}


def parameter_count(hidden_size, steps):
    return steps * hidden_size * hidden_size + 2 * hidden_size + 1


def _numpy(parameter):
    return np.ascontiguousarray(parameter.detach().numpy(), dtype=np.float32)
