"""What ``compare_table`` compares between two sheets beyond cells: charts, pivot tables, autofilters and row or
column dimensions, each summarised into plain data the way OSWorld summarises it (two sheets pass when the
summaries are equal). A sheet that does not exist summarises as ``{}``, as upstream's does."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openpyxl.utils import coordinate_to_tuple

#: chart_props -> how a chart yields it; titles are the first run of the first paragraph of a rich-text title
_CHART_PROPS = ("title", "legend", "anchor", "width", "height", "type", "direction", "xtitle", "ytitle", "ztitle")


def charts(worksheet: Any, props: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{"<values>,<categories>;...": {prop: value}}``: each chart keyed by its series' data references (a later
    chart with the same series replaces an earlier one)."""
    if worksheet is None:
        return {}
    wanted = set(props)
    unknown = wanted - set(_CHART_PROPS)
    if unknown:
        raise ValueError(f"compare_table: unknown chart_props {sorted(unknown)}; known: {', '.join(_CHART_PROPS)}")
    summary: dict[str, dict[str, Any]] = {}
    for chart in worksheet._charts:  # openpyxl keeps the charts it read only here
        key = ";".join(f"{_reference(s.val)},{_reference(s.cat)}" for s in chart.series)
        info: dict[str, Any] = {}
        for prop in _CHART_PROPS:  # upstream's order, so the summaries print alike
            if prop in wanted:
                info[prop] = _chart_prop(chart, prop)
        summary[key] = info
    return summary


def _reference(source: Any) -> str:
    for kind in ("numRef", "strRef"):
        ref = getattr(source, kind, None)
        if ref is not None and hasattr(ref, "f"):
            return ref.f
    return ""


def _chart_prop(chart: Any, prop: str) -> Any:
    if prop in ("title", "xtitle", "ytitle", "ztitle"):
        owner = chart if prop == "title" else getattr(chart, f"{prop[0]}_axis", None)
        try:
            return owner.title.tx.rich.p[0].r[0].t
        except (AttributeError, IndexError, TypeError):
            return None
    if prop == "legend":
        return chart.legend.position if chart.legend is not None else None
    if prop == "anchor":
        # upstream's list, which takes the "to" row where the "from" row would go
        anchor = chart.anchor
        return [anchor.editAs, anchor._from.col, anchor.to.row, anchor.to.col, anchor.to.row]
    if prop == "type":
        return chart.tagname
    if prop == "direction":
        return getattr(chart, "barDir", None)  # upstream raises for charts without bars
    return getattr(chart, prop)  # width, height


def pivot_tables(worksheet: Any, props: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{"worksheet;(r1, c1):(r2, c2);<sheet>": {prop: value}}``: each pivot table keyed by its source range, with
    field positions counted from the first source column whose field has items (OSWorld's ``load_pivot_tables``).

    ``pivot_props``: ``name``, ``show_total``, ``show_empty_row``, ``show_empty_col``, ``show_headers``,
    ``location``, ``selection`` (per field, the set of ``(hidden, item)`` pairs; a list in order with
    ``ordered``), ``filter`` (``selection`` plus the page fields), ``col_fields``, ``row_fields``, ``data_fields``
    (``"field;name;subtotal;show_data_as"``, the name only with ``data_fields_name``)."""
    if worksheet is None:
        return {}
    wanted = set(props)
    summary: dict[str, dict[str, Any]] = {}
    for pivot in worksheet._pivots:
        items = [[(item.h, item.x) for item in field.items if item.x is not None] for field in pivot.pivotFields]
        used = [i for i, field_items in enumerate(items) if field_items]
        first, last = (used[0], used[-1]) if used else (len(items), len(items) - 1)
        selection = items[first:last + 1]
        left, right = first, len(items) - 1 - last if used else 0
        source = pivot.cache.cacheSource
        where = source.worksheetSource
        start, end = (coordinate_to_tuple(c) for c in where.ref.split(":"))
        key = f"{source.type};{(start[0], start[1] + left)}:{(end[0], end[1] - right)};{where.sheet}"
        info: dict[str, Any] = {}
        if "name" in wanted:
            info["name"] = pivot.name
        for prop, attribute in (("show_total", "visualTotals"), ("show_empty_row", "showEmptyRow"),
                                ("show_empty_col", "showEmptyCol"), ("show_headers", "showHeaders"),
                                ("location", "location")):
            if prop in wanted:
                info[prop] = getattr(pivot, attribute)
        if "filter" in wanted or "selection" in wanted:
            info["selection"] = selection if "ordered" in wanted else [set(field) for field in selection]
        if "filter" in wanted:
            info["filter_fields"] = {field.fld for field in pivot.pageFields}
        if "col_fields" in wanted:
            info["col_fields"] = [field.x - left for field in pivot.colFields]
        if "row_fields" in wanted:
            info["row_fields"] = [field.x - left for field in pivot.rowFields]
        if "data_fields" in wanted:
            named = "data_fields_name" in wanted
            info["data_fields"] = [f"{field.fld - left:d};{field.name if named else ''};{field.subtotal};"
                                   f"{field.showDataAs}" for field in pivot.dataFields]
        summary[key] = info
    return summary


def dimensions(worksheet: Any, kind: str, props: Iterable[str]) -> dict[Any, dict[str, Any]]:
    """Each row (``kind="row"``, by number) or column (``"column"``, by letter) the sheet records dimensions for:
    ``{prop: value}`` for ``hidden``, ``height``, ``collapsed``, ``outlineLevel``, ``width``, ..."""
    if worksheet is None:
        return {}
    wanted = list(dict.fromkeys(props))
    held = getattr(worksheet, f"{kind}_dimensions")
    summary = {}
    for key, dimension in held.items():
        try:
            summary[key] = {prop: getattr(dimension, prop) for prop in wanted}
        except AttributeError as exc:
            raise ValueError(f"compare_table: {kind}_props: {exc}") from None
    return summary


def autofilter(worksheet: Any) -> dict[str, Any]:
    """The sheet's autofilter: range, per-column filters and sort state."""
    if worksheet is None:
        return {}
    found = worksheet.auto_filter
    columns = []
    for column in found.filterColumn:
        entry: dict[str, Any] = {"col_id": column.colId, "hidden_button": column.hiddenButton,
                                 "show_button": column.showButton}
        if column.filters is not None:
            entry["filters_blank"] = column.filters.blank
            entry["filters"] = set(column.filters.filter)
        if column.customFilters is not None:
            entry["custom_filters_op"] = column.customFilters._and
            entry["custom_filters"] = {(f.operator, f.val) for f in column.customFilters.customFilter}
        columns.append(entry)
    summary: dict[str, Any] = {"ref": found.ref, "filter_column": sorted(columns, key=lambda c: c["col_id"])}
    sort = found.sortState
    if sort is not None:
        summary["sort_state"] = {
            "sort": sort.columnSort, "case": sort.caseSensitive, "method": sort.sortMethod, "ref": sort.ref,
            "condition": [{"descending": c.descending, "key": c.sortBy, "ref": c.ref, "custom_list": c.customList,
                           "dxf_id": c.dxfId, "icon": c.iconSet, "iconid": c.iconId} for c in sort.sortCondition],
        }
    return summary
