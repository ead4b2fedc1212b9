"""What a gang asks of the topology: levels it must or should stay within, and its parallelism.

Voltpack's own fields, or the annotations of Kueue (`kueue.x-k8s.io/podset-required-topology`,
`kueue.x-k8s.io/podset-preferred-topology`) and KAI (`kai.scheduler/topology-required-placement`,
`kai.scheduler/topology-preferred-placement`), whose values name a level by its node label.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voltpack.model.errors import InvalidRequestError

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"

VOLTPACK_REQUIRED = "voltpack.io/topology-required"
VOLTPACK_PREFERRED = "voltpack.io/topology-preferred"
VOLTPACK_MODEL = "voltpack.io/training-model"
VOLTPACK_TENSOR_PARALLEL = "voltpack.io/tensor-parallel"
VOLTPACK_PIPELINE_PARALLEL = "voltpack.io/pipeline-parallel"
VOLTPACK_ANNOTATIONS = (
    VOLTPACK_REQUIRED,
    VOLTPACK_PREFERRED,
    VOLTPACK_MODEL,
    VOLTPACK_TENSOR_PARALLEL,
    VOLTPACK_PIPELINE_PARALLEL,
)
"""voltpack's own pod annotations for a gang's request (the GPUJob controller writes them)."""


class TopologyRequest(BaseModel):
    """A gang's topology request; levels are named by node label (or level name)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    required_level: str | None = Field(default=None, min_length=1)
    """The whole gang must fit in one domain of this level, or it waits."""
    preferred_level: str | None = Field(default=None, min_length=1)
    """Try one domain of this level first; fall back to higher levels."""
    model: str | None = Field(default=None, min_length=1)
    """A training model of the perf catalog: the step time decides the placement."""
    tensor_parallel: int = Field(default=1, ge=1, le=64)
    pipeline_parallel: int = Field(default=1, ge=1, le=1024)

    @classmethod
    def from_annotations(cls, annotations: dict[str, str]) -> TopologyRequest | None:
        """Kueue's or KAI's level annotations as a request (Kueue's win when both are set)."""
        required = annotations.get(KUEUE_REQUIRED) or annotations.get(KAI_REQUIRED)
        preferred = annotations.get(KUEUE_PREFERRED) or annotations.get(KAI_PREFERRED)
        if not required and not preferred:
            return None
        return cls(required_level=required or None, preferred_level=preferred or None)

    @classmethod
    def from_pod_annotations(cls, annotations: dict[str, str]) -> TopologyRequest | None:
        """A pod's request: voltpack's annotations when any is set, else Kueue's or KAI's.

        Raises InvalidRequestError naming the annotation when a value is malformed.
        """
        if not any(annotations.get(name) for name in VOLTPACK_ANNOTATIONS):
            return cls.from_annotations(annotations)
        degrees: dict[str, int] = {}
        for name, field in (
            (VOLTPACK_TENSOR_PARALLEL, "tensor_parallel"),
            (VOLTPACK_PIPELINE_PARALLEL, "pipeline_parallel"),
        ):
            text = annotations.get(name)
            if not text:
                continue
            try:
                degrees[field] = int(text)
            except ValueError:
                raise InvalidRequestError(f"annotation {name}={text!r} is not an integer") from None
        try:
            return cls(
                required_level=annotations.get(VOLTPACK_REQUIRED) or None,
                preferred_level=annotations.get(VOLTPACK_PREFERRED) or None,
                model=annotations.get(VOLTPACK_MODEL) or None,
                **degrees,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else "request"
            name = {
                "tensor_parallel": VOLTPACK_TENSOR_PARALLEL,
                "pipeline_parallel": VOLTPACK_PIPELINE_PARALLEL,
            }.get(field, field)
            raise InvalidRequestError(f"annotation {name}: {first['msg']}") from None
