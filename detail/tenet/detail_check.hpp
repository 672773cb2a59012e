// Internal headers of tenet (everything under detail/) are not part of the public API: include
// <tenet/tenet.hpp> or another header from include/tenet instead. (The same guard as Eigen's
// InternalHeaderCheck.h.)
#ifndef TENET_PUBLIC_HEADER_INCLUDED
#error "tenet: this is an internal header; include <tenet/tenet.hpp> (or another public header) instead"
#endif
