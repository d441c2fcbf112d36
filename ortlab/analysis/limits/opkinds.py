"""What kind of work an op is when it computes nothing: data movement (no FLOPs), metadata
(reads no data), in place (moves no bytes: ORT aliases its output to its input), control flow
(its body's nodes are counted on their own). :mod:`.formulas` counts every op by these."""

from __future__ import annotations

__all__ = ["ALIASING", "CONTROL", "DATA", "METADATA"]

DATA = frozenset(
    (
        "Reshape",
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "Scatter",
        "ScatterElements",
        "ScatterND",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Identity",
        "Expand",
        "Tile",
        "Pad",
        "Cast",
        "CastLike",
        "ConstantOfShape",
        "Range",
        "NonZero",
        "ReorderInput",
        "ReorderOutput",
        "DepthToSpace",
        "SpaceToDepth",
        "Dropout",
        "OneHot",
        "Compress",
        "ReverseSequence",
        "Trilu",
        "EyeLike",
        "MemcpyFromHost",
        "MemcpyToHost",
        "ZipMap",
        "QLinearConcat",
        "Constant",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceInsert",
        "SequenceLength",
        "SplitToSequence",
        "ConcatFromSequence",
        "Col2Im",
        "Unique",
        "GatherBlockQuantized",
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Bernoulli",
        "Multinomial",
        "Optional",
        "OptionalGetElement",
        "OptionalHasElement",
        "StringNormalizer",
        "LabelEncoder",
        "CategoryMapper",
        "ArrayFeatureExtractor",
        "Imputer",
        "Binarizer",
        "Normalizer",
        "FeatureVectorizer",
        "Shape",
        "Size",
    )
)
METADATA = frozenset(("Shape", "Size"))
ALIASING = frozenset(("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"))
"""Ops ORT's CPU kernels run in place: their output is their input's buffer (the kernel
declares an alias and the allocation planner reuses it), so no byte moves — counting their
input and output as traffic put a 0.8 MB Reshape "above the roof" in 4 µs (issue 47)."""
CONTROL = frozenset(("If", "Loop", "Scan"))
