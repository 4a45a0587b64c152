"""A boolean build setting without bazel_skylib (not packaged offline)."""

BoolSettingInfo = provider(fields = ["value"])

def _bool_setting_impl(ctx):
    return BoolSettingInfo(value = ctx.build_setting_value)

bool_flag = rule(
    implementation = _bool_setting_impl,
    build_setting = config.bool(flag = True),
)
