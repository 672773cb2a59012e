#pragma once
#include <tenet/ops.hpp>
