"""Hypothesis strategies shared by the tests: target sizes and draft configs."""

from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD, IDS_FIELD


@st.composite
def embed_ids(draw, num_layers: int, max_size: int = 4):
    """A valid layer-output id list containing -1, in any order (ids -1..L-2)."""
    others = draw(
        st.lists(st.integers(0, num_layers - 2), unique=True, max_size=min(max_size - 1, num_layers - 1))
    )
    return draw(st.permutations([-1, *others]))


@st.composite
def draft_config(draw, ids, declare: str | None = None):
    """A draft config holding ``ids`` nested, at the top level, or both."""
    where = draw(st.sampled_from(["nested", "top", "both"]))
    config: dict = {"architectures": ["LlamaForCausalLMEagle3"]}
    if where in ("nested", "both"):
        config["eagle_config"] = {IDS_FIELD: list(ids)}
    if where in ("top", "both"):
        config[IDS_FIELD] = list(ids)
    if declare is not None:
        holder = config.get("eagle_config", config) if draw(st.booleans()) else config
        holder[CONVENTION_FIELD] = declare
    # Top-level ids alone do not size the draft's fc (llama_eagle3.py reads only the nested
    # list, else 3), so such a draft needs num_aux_hidden_states unless it reads 3 tensors.
    if (where == "top" and len(ids) != 3) or draw(st.booleans()):
        config["num_aux_hidden_states"] = len(ids)
    return config


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def messy_draft_config(draw):
    """Draft configs that are often malformed: wrong types in every field the plugin reads."""
    keys = [IDS_FIELD, CONVENTION_FIELD, "use_aux_hidden_state", "num_aux_hidden_states"]
    value = st.one_of(
        JSON, st.lists(st.integers(-3, 70), max_size=5), st.sampled_from(["layer_output", "hidden_states"])
    )
    nested = draw(st.one_of(st.none(), JSON, st.dictionaries(st.sampled_from(keys), value)))
    top = draw(st.dictionaries(st.sampled_from(keys), value))
    if nested is not None:
        top["eagle_config"] = nested
    return top
