#pragma once
// The workbench's Qt resources (icon, default settings) live in a static library: register
// them once before use.

void lazyscope_init_workbench_resources();
