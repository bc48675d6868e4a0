/*
 * Each role's confinement: the capabilities its table in caps.c names, handed
 * to pol_caps_confine (caps_confine.c). Apart from both, so that what only
 * reads the tables (the supervisor, the printers) links no confinement, and
 * what confines itself from a compiled policy (the capable core) no table.
 */
#include "pol_caps.h"

int pol_caps_confine_helper(bool directories)
{
	return pol_caps_confine(pol_caps_helper_mask() |
	                            (directories ? pol_caps_helper_dirs_mask() : 0),
	                        pol_caps_helper_optional_mask(), 0);
}

int pol_caps_confine_core(void)
{
	uint64_t all = pol_caps_helper_mask() | pol_caps_helper_optional_mask();
	return pol_caps_confine(pol_caps_helper_mask(), pol_caps_helper_optional_mask(), all);
}

int pol_caps_confine_helper_core(void)
{
	return pol_caps_confine(pol_caps_helper_core_mask(), 0, 0);
}

int pol_caps_confine_tools(void)
{
	return pol_caps_confine(0, 0, 0);
}

int pol_caps_confine_tree(void)
{
	return pol_caps_confine(pol_caps_tree_mask(), 0, pol_caps_tree_mask());
}
