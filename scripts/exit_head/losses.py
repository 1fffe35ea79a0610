"""The self-distillation loss (EESD §3.2) over a sampled softmax.

loss = kl_weight * KL(teacher || student) + ce_weight * CE(student, next token), averaged over
positions. The teacher is the full model's top-k distribution renormalised over its k ids. The
student's distribution is a softmax over a candidate set rather than the full vocabulary (a
152k-row LM head per position is too slow on a small CPU): the union of the batch's top-k ids,
its next tokens and `negatives` vocabulary ids drawn uniformly at random (all ids when negatives
is at least the vocabulary size, which makes the softmax exact). The random ids stand in for
the rest of the vocabulary in the normaliser, so that the student's other tokens are pushed down.
"""

import torch


def candidate_ids(topk_ids, next_token, vocab_size, negatives, generator):
    """Sorted unique int64 ids: the targets plus `negatives` uniform random vocabulary ids."""
    if negatives >= vocab_size:
        return torch.arange(vocab_size, dtype=torch.int64)
    sampled = torch.randint(vocab_size, (negatives,), generator=generator, dtype=torch.int64)
    return torch.unique(torch.cat([topk_ids.reshape(-1), next_token, sampled]))


def distillation_loss(z, head, topk_ids, topk_logprobs, next_token, negatives, generator,
                      kl_weight, ce_weight):
    """(loss, kl, ce) for normed final states z [M, H] of M positions; the teacher's topk_ids /
    topk_logprobs [M, k] and next_token [M]. head: exit_layer.FrozenHead."""
    ids = candidate_ids(topk_ids, next_token, head.vocab_size, negatives, generator)
    student = torch.log_softmax(torch.matmul(z, head.rows(ids).t()), dim=-1)  # [M, C]
    teacher = torch.softmax(topk_logprobs, dim=-1)  # renormalised over the k ids
    student_topk = student.gather(1, torch.searchsorted(ids, topk_ids))
    kl = (teacher * (torch.log(teacher.clamp_min(1e-30)) - student_topk)).sum(dim=1).mean()
    ce = -student.gather(1, torch.searchsorted(ids, next_token).unsqueeze(1)).mean()
    return kl_weight * kl + ce_weight * ce, kl, ce
