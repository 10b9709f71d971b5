"""Entry-point module ``judges-builtin``: OSWorld-named getters and metrics.

References are lazy (``module:function``) so listing plugins imports neither
openpyxl, python-docx nor python-pptx.
"""

from __future__ import annotations

from core import hookimpl

_GETTERS = {
    "environments.judges.getters": (
        "vm_file", "cloud_file", "cache_file", "vm_command_line", "vm_command_error", "rule", "accessibility_tree",
        "list_directory", "vm_screen_size", "vm_file_text", "vm_files_exist", "gimp_config_file",
        "vlc_config", "vscode_config",
    ),
    "environments.judges.chrome": (
        "default_search_engine", "profile_name", "enable_do_not_track", "enable_enhanced_safety_browsing",
        "new_startup_page", "data_delete_automacally", "find_unpacked_extension_path", "open_tabs_info",
        "active_url_from_accessTree", "active_tab_info", "active_tab_url_parse", "url_dashPart", "bookmarks",
    ),
    "environments.judges.relative_time": ("rule_relativeTime",),
    "environments.judges.html_parse": ("active_tab_html_parse",),
    "environments.judges.vlc": ("vm_window_size", "vlc_playing_info"),
    "environments.judges.chrome_profile": ("history", "cookie_data", "chrome_font_size", "enabled_experiments",
                                           "shortcuts_on_desktop", "find_installed_extension_name", "page_info"),
    "environments.judges.media": ("background_image_in_slide", "audio_in_slide", "pdf_from_url"),
    "environments.judges.web_pages": ("info_from_website", "gotoRecreationPage_and_get_html_content"),
    "environments.judges.system": ("vm_terminal_output", "vm_wallpaper", "default_video_player",
                                   "content_from_vm_file", "url_path_parse"),
}
GETTER_NAMES = tuple(name for names in _GETTERS.values() for name in names)

_METRICS = {
    "environments.judges.metrics": (
        "exact_match", "literal_match", "match_in_list", "is_in_list", "check_include_exclude", "fuzzy_match",
        "fuzzy_match_threshold", "check_value", "infeasible", "compare_text_file", "diff_text_file",
        "check_text_file", "check_list", "check_csv", "compare_csv", "check_json", "check_direct_json_object",
        "check_accessibility_tree",
    ),
    "environments.judges.tables": ("compare_table",),
    "environments.judges.documents": ("compare_docx_files", "compare_document_text", "check_document",
                                      "compare_docx_tables"),
    "environments.judges.docx_format": (
        "compare_line_spacing", "compare_docx_images", "check_tabstops", "compare_subscript_contains",
        "compare_insert_equation", "has_page_numbers_in_footers", "compare_font_names", "is_first_line_centered",
        "contains_page_break", "evaluate_strike_through_last_paragraph", "check_italic_font_size_14",
        "evaluate_conversion", "evaluate_spacing",
    ),
    "environments.judges.files": (
        "compare_archive", "compare_zip_files", "file_contains", "check_line_number", "compare_terminal_and_txt",
        "compare_python_pure_text", "check_json_keybindings", "compare_config", "compare_answer", "check_mp3_meta",
    ),
    "environments.judges.browser": (
        "is_expected_tabs", "is_expected_active_tab", "is_expected_active_tab_approximate",
        "is_expected_url_pattern_match", "is_expected_bookmarks",
    ),
    "environments.judges.images": ("compare_images",),
    "environments.judges.gimp": (
        "check_structure_sim", "check_structure_sim_resized", "check_file_exists_and_structure_sim",
        "check_brightness_decrease_and_structure_sim", "check_saturation_increase_and_structure_sim",
        "check_contrast_increase_and_structure_sim", "check_palette_and_structure_sim", "check_image_mirror",
        "check_green_background", "check_triangle_position", "check_textbox_on_leftside", "check_image_size",
        "check_image_file_size", "check_config_status", "compare_image_list",
    ),
    "environments.judges.pdfs": ("compare_pdfs",),
    "environments.judges.apps": ("check_json_settings", "is_extension_installed", "check_thunderbird_prefs",
                                 "check_thunderbird_filter", "check_thunderbird_folder"),
    "environments.judges.slides": ("compare_pptx_files",),
    "environments.judges.chrome_profile": (
        "check_history_deleted", "is_cookie_deleted", "check_font_size", "check_enabled_experiments",
        "is_shortcut_on_desktop", "is_expected_installed_extensions", "is_added_to_steam_cart",
    ),
    "environments.judges.office_more": (
        "check_highlighted_words", "find_default_font", "compare_unique_train_records",
        "evaluate_colored_words_in_tables", "compare_docx_files_and_ignore_new_lines", "compare_references",
        "fuzzy_place_math",
    ),
    "environments.judges.web_files": (
        "check_pdf_pages", "compare_pdf_images", "compare_htmls", "compare_epub", "compare_result_files",
        "compare_conference_city_in_order",
    ),
    "environments.judges.media": ("compare_videos", "compare_audios"),
    "environments.judges.sandboxed": ("check_python_file_by_test_suite",),
    "environments.judges.ocr": ("compare_image_text",),
    "environments.judges.system": ("is_utc_0", "check_moved_jpgs", "check_gnome_favorite_apps", "run_sqlite3",
                                   "is_expected_search_query", "is_in_vm_clickboard"),
    "environments.judges.vlc": (
        "check_qt_bgcone", "check_qt_max_volume", "check_qt_minimal_view", "check_qt_slider_colours",
        "check_global_key_play_pause", "check_one_instance_when_started_from_file", "is_vlc_recordings_folder",
        "is_vlc_fullscreen", "is_vlc_playing",
    ),
    "environments.judges.impress": (
        "check_presenter_console_disable", "check_auto_saving_time", "check_slide_orientation_Portrait",
        "check_transition", "check_page_number_colors", "evaluate_presentation_fill_to_rgb_distance",
        "check_image_stretch_and_center", "check_left_panel",
    ),
}


@hookimpl
def scalecua_register_getters(registry):
    for module, names in _GETTERS.items():
        for name in names:
            registry.register(name, f"{module}:get_{name}", description=f"OSWorld getter get_{name}")


@hookimpl
def scalecua_register_metrics(registry):
    for module, names in _METRICS.items():
        for name in names:
            registry.register(name, f"{module}:{name}", description=f"OSWorld-compatible metric {name}")
