#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The rule table (prims/rule_table.hpp) with every prim group's entries: the autograd engine
// (autograd/vjp.hpp, autograd/jvp.hpp) and each group's rules, included before any rule is looked
// up (record.hpp and schedule/backward_fusion.hpp include this header).
#include <tenet/autograd/jvp.hpp>
#include <tenet/autograd/vjp.hpp>
#include <tenet/prims/composite_rules.hpp>
#include <tenet/prims/elementwise_rules.hpp>
#include <tenet/prims/indexing_rules.hpp>
#include <tenet/prims/movement_rules.hpp>
#include <tenet/prims/reduce_rules.hpp>
#include <tenet/prims/rule_table.hpp>
#include <tenet/prims/scan_rules.hpp>
#include <tenet/prims/sort_rules.hpp>
