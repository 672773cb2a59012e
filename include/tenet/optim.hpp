#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// tenet::optim, as torch.optim: the optimizers (SGD, Adam, AdamW, RMSprop, Adagrad:
// optim/optimizers.hpp) and the LR schedulers (optim/lr_scheduler.hpp).
#include <tenet/optim/lr_scheduler.hpp>
#include <tenet/optim/optimizers.hpp>
