"""Pydantic request and response models of the HTTP API, generated from the round contract's types.

The instance models (``NodeModel`` ... ``InstanceModel``) are generated at import from the
dataclasses of :mod:`optsched.model`: same fields, defaults and docstrings, JSON types derived
from the Python types, with the bounds that JSON Schema can say (``_OVERRIDES``). A field added to
the contract appears in the API by itself; one whose type has no JSON mapping fails at import.
They give the OpenAPI schema its shape. They do not validate requests: a request's ``instance``
is :data:`ContractInstance`, read by ``Instance.from_dict`` exactly as the CLI and the Python API
read a round (so the service accepts and refuses exactly what they do), and its
:class:`~optsched.errors.InputError` becomes a 422 naming the field (``tests/test_service.py``
checks that every bundled instance and random valid rounds pass both unchanged, and
``tests/test_malformed.py`` that malformed ones get the same refusal everywhere).

Models are strict: ``"4"`` is not an integer and ``true`` is not a number, as in the contract.
Unknown fields are ignored, as ``from_dict`` ignores them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, create_model, model_validator

from optsched import model as _model
from optsched.fields import unknown_field
from optsched.limits import MAX_SEED
from optsched.schedule import ASSIGNMENT_KEYS, SCHEDULE_KEYS

__all__ = [
    "AssignmentModel",
    "CheckRequest",
    "ContractInstance",
    "CheckResponse",
    "DemandModel",
    "ErrorBody",
    "FieldError",
    "Health",
    "InstanceModel",
    "JobModel",
    "MethodModel",
    "NodeModel",
    "OptionModel",
    "ProfileModel",
    "RoundModel",
    "ScheduleModel",
    "SolveRequest",
    "SolveResponse",
    "ValidateRequest",
    "ValidateResponse",
    "ViolationModel",
]


_STRICT = ConfigDict(strict=True, extra="ignore")
#: a request's own fields: a misspelt one (``tim_limit``) is a 422, not a default silently applied
_REQUEST = ConfigDict(strict=True, extra="forbid")
NonEmpty = Annotated[str, Field(min_length=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


# --- the round instance (docs/contract.md, "Round instance"), generated from optsched.model -------

#: (type, field) -> the JSON type where it is not the generic one, with the bounds ``__post_init__`` checks
_OVERRIDES: dict[tuple[str, str], Any] = {
    ("Node", "rack"): NonEmpty | None,
    ("Profile", "cpus_per_gpu"): Annotated[list[NonNegInt], Field(min_length=1)],
    ("Profile", "mem_per_gpu_gb"): Annotated[list[NonNegInt], Field(min_length=1)],
    ("Profile", "throughput"): Annotated[list[list[PosFloat]], Field(min_length=1, description="throughput[a][b]: cpus_per_gpu[a], mem_per_gpu_gb[b]")],
    ("Job", "gpus"): Annotated[int, Field(ge=1)],
    ("Job", "weight"): PosFloat,
    ("Job", "demand"): "DemandModel",
    ("Job", "gpu_speed"): Annotated[dict[NonEmpty, PosFloat] | None, Field(min_length=1, description="allowed GPU types and speed factors; absent: all at 1.0")],
    ("Job", "spread_factor"): Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)],
    ("Job", "placement"): Annotated[dict[NonEmpty, Annotated[int, Field(ge=1)]] | None, Field(description="node id -> GPUs held now (running jobs)")],
    ("Job", "restart_s"): Annotated[float, Field(ge=0, allow_inf_nan=False)],
    ("Elastic", "gpus"): Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1, description="GPU counts allowed, increasing")],
    ("Elastic", "scaling"): Annotated[list[PosFloat], Field(min_length=1, description="throughput at each count relative to the nominal gpus")],
    ("Round", "duration_s"): PosFloat,
    ("Instance", "version"): Literal[tuple(getattr(_model, "CONTRACT_VERSIONS", (_model.CONTRACT_VERSION,)))],  # type: ignore[misc]
}


class _ContractModel(BaseModel):
    model_config = _STRICT

    def contract_dict(self) -> dict[str, Any]:
        """The contract JSON as sent (fields left out stay out, so the model's defaults apply)."""
        return self.model_dump(exclude_unset=True)


class DemandModel(_ContractModel):
    """The fixed per-GPU demand, a point of the profile grid (``Job.demand`` as a JSON object)."""

    cpus_per_gpu: NonNegInt
    mem_per_gpu_gb: NonNegInt


def _json_type(tp: Any, where: str) -> Any:
    """The pydantic type of a contract field's Python type (generic: str non-empty, int >= 0, float finite)."""
    if isinstance(tp, type) and tp in _GENERATED:
        return _GENERATED[tp]
    if tp is str:
        return NonEmpty
    if tp is bool:
        return bool
    if tp is int:
        return NonNegInt
    if tp is float:
        return Annotated[float, Field(allow_inf_nan=False)]
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, UnionType) and type(None) in args and len(args) == 2:
        return _json_type(next(a for a in args if a is not type(None)), where) | None
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return list[_json_type(args[0], where)]  # type: ignore[misc]
    if origin in (Mapping, dict) and len(args) == 2:
        return dict[_json_type(args[0], where), _json_type(args[1], where)]  # type: ignore[misc]
    raise TypeError(f"{where}: no JSON type for {tp!r}; add it to _OVERRIDES in optsched/service/schemas.py")


_GENERATED: dict[type, type[_ContractModel]] = {}


def _generate(cls: type) -> type[_ContractModel]:
    """A pydantic model with the fields, defaults and docstring of contract type ``cls``."""
    hints = get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        tp = _OVERRIDES.get((cls.__name__, f.name)) or _json_type(hints[f.name], f"{cls.__name__}.{f.name}")
        if tp == "DemandModel":
            tp = DemandModel
        if f.default is not dataclasses.MISSING:
            info = Field(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            factory = f.default_factory
            info = Field(default_factory=_GENERATED[factory]) if factory in _GENERATED else Field(default_factory=factory)
        else:
            info = Field()
        fields[f.name] = (tp, info)
    model = create_model(f"{cls.__name__}Model", __base__=_ContractModel, __doc__=f"``optsched.model.{cls.__name__}``: {cls.__doc__}",
                         **fields)
    _GENERATED[cls] = model
    return model


NodeModel = _generate(_model.Node)
ProfileModel = _generate(_model.Profile)
ElasticModel = _generate(_model.Elastic)
JobModel = _generate(_model.Job)
RoundModel = _generate(_model.Round)
InstanceModel = _generate(_model.Instance)
unknown = {k for k in _OVERRIDES if k[1] not in {f.name for f in dataclasses.fields(getattr(_model, k[0]))}}
if unknown:  # an override for a field the contract no longer has
    raise TypeError(f"optsched/service/schemas.py overrides unknown contract fields {sorted(unknown)}")
del unknown


def _contract_instance(value: Any) -> _model.Instance:
    """A request's round, read by the contract's own ``Instance.from_dict``: its ``InputError``
    (a ``ValueError``) reaches the app's 422 handler with the field it names."""
    return _model.Instance.from_dict(value)


#: a request's ``instance``: documented as :data:`InstanceModel`, validated by ``Instance.from_dict``
ContractInstance = Annotated[Any, PlainValidator(_contract_instance, json_schema_input_type=InstanceModel)]


# --- schedules (docs/contract.md, "Schedule") ------------------------------------------------------


def _refuse_unknown(data: Any, known: frozenset[str], what: str) -> Any:
    """``data`` unchanged, or a ValueError naming its first field the contract does not have."""
    if isinstance(data, Mapping) and (bad := unknown_field(data, known, what)) is not None:
        raise ValueError(str(bad))
    return data


class AssignmentModel(BaseModel):
    """Where one job runs (node id -> GPUs) and its per-GPU CPU cores and memory."""

    model_config = _STRICT
    nodes: dict[str, int]
    cpus_per_gpu: int
    mem_per_gpu_gb: int

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        return _refuse_unknown(data, ASSIGNMENT_KEYS, "an assignment")


class ScheduleModel(BaseModel):
    """A decision: job id -> assignment (``null`` or absent: not scheduled; ``{}``: nothing runs).
    Report fields are read past; a field the contract does not have is refused.

    Only types are checked here; whether the decision is feasible is the checker's answer.
    """

    model_config = ConfigDict(strict=True, extra="allow")
    instance: str = ""
    jobs: dict[str, AssignmentModel | None]

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        return _refuse_unknown(data, SCHEDULE_KEYS, "a schedule")

    def contract_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "jobs": {j: None if a is None else a.model_dump() for j, a in self.jobs.items()}}


# --- requests and responses ------------------------------------------------------------------------

Method = Literal["auto", "exact", "heuristic", "learned"]
TimeLimit = Annotated[
    float | None,
    Field(gt=0, allow_inf_nan=False, description="seconds; default and cap are set by the server (see /healthz)"),
]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


class SolveRequest(BaseModel):
    """``POST /v1/solve``: what ``solve_round(instance, method, solver=, time_limit=, seed=, hint=, options=)`` takes."""

    model_config = _REQUEST
    instance: ContractInstance
    method: Method = "auto"
    solver: NonEmpty | None = Field(None, description="a registered solver by name (GET /v1/methods); overrides the family default")
    time_limit: TimeLimit = None
    seed: Seed = 0
    hint: ScheduleModel | None = Field(None, description="a feasible schedule to warm-start solvers that take hints")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="the solver's options by name (GET /v1/methods lists each method's); validated by the method's options "
                    "class as in Python and the CLI: an unknown name or a bad value is a 422 naming options.NAME")


class SolveResponse(BaseModel):
    """The contract's schedule JSON with its reports, plus the time limit the server applied."""

    instance: str
    jobs: dict[str, AssignmentModel]
    objective: float
    bound: float | None
    gap: float | None
    status: Literal["optimal", "feasible", "time_limit"]
    solver: str
    method: str
    time_s: float
    stats: dict[str, Any] = Field(default_factory=dict)
    time_limit: float = Field(description="the time limit applied: the request's, capped by the server's maximum")


class CheckRequest(BaseModel):
    """``POST /v1/check``: the independent checker on one decision."""

    model_config = _REQUEST
    instance: ContractInstance
    schedule: ScheduleModel


class ViolationModel(BaseModel):
    """One broken rule, numbered as in the contract's "Feasible" list."""

    rule: int
    message: str
    job: str | None = None
    node: str | None = None


class CheckResponse(BaseModel):
    feasible: bool
    objective: float = Field(description="recomputed from the contract; meaningful only when feasible")
    violations: list[ViolationModel]


class ValidateRequest(BaseModel):
    """``POST /v1/validate``: judge an external decision against a reference solve (``optsched validate``)."""

    model_config = _REQUEST
    instance: ContractInstance
    decision: ScheduleModel
    solver: NonEmpty = Field("cpsat", description="the reference solver (default cpsat)")
    time_limit: TimeLimit = None
    seed: Seed = 0
    loglik: bool = Field(False, description="also score the decision under the shipped learned policy")


class ReferenceModel(BaseModel):
    solver: str
    status: str
    objective: float
    bound: float | None
    time_s: float


class DiffRow(BaseModel):
    job: str
    kind: str = Field(description="left_out, added, or '+'-joined placed_elsewhere, worse_point, better_point, off_grid_point")
    decision: dict[str, Any] | None
    reference: dict[str, Any] | None


class ValidateResponse(BaseModel):
    """The report of ``optsched validate --json`` for one decision, plus the time limit applied."""

    instance: str
    feasible: bool
    violations: list[ViolationModel]
    objective: float | None
    reference: ReferenceModel
    gap_to_reference: float | None = None
    gap_to_bound: float | None = None
    beats_reference: bool | None = None
    diff: list[DiffRow] | None = None
    diff_error: str | None = None
    diff_counts: dict[str, int] | None = None
    loglik: dict[str, float] | None = None
    time_limit: float


class OptionModel(BaseModel):
    """One option of a method (``optsched methods --options``)."""

    name: str
    type: str
    default: Any = None
    help: str
    remote: bool = Field(description="accepted over HTTP (false: for Python and CLI callers only)")


class MethodModel(BaseModel):
    """A registered solve method (``optsched methods --json``)."""

    name: str
    family: str
    summary: str
    takes_hint: bool
    default: bool
    options: list[OptionModel] = Field(default_factory=list, description="the options it takes (POST /v1/solve's options)")


class Health(BaseModel):
    """``GET /healthz``: the service is up; its capacity and current load."""

    status: Literal["ok"]
    version: str
    workers: int = Field(description="solve worker processes")
    workers_alive: int
    queue: int = Field(description="requests that may wait for a worker beyond those running")
    in_flight: int = Field(description="solve/validate requests running or waiting now")
    default_time_limit: float
    max_time_limit: float


class FieldError(BaseModel):
    field: str
    value: Any = None
    problem: str


class ErrorBody(BaseModel):
    """Every error response: ``error`` is a stable code, ``message`` says what happened.

    Codes: ``bad_input`` (422; ``field``/``value``/``problem`` name the first bad field, ``errors``
    lists all that the schema found), ``unauthorized`` (401), ``too_large`` (413),
    ``over_capacity`` (429), ``unavailable`` (503),
    ``solver_error`` (500: the solver raised or its process died), ``solver_timeout`` (504: it
    overran its time limit by far; its worker was restarted), ``internal`` (500).
    """

    error: str
    message: str
    field: str | None = None
    value: Any = None
    problem: str | None = None
    errors: list[FieldError] | None = None
