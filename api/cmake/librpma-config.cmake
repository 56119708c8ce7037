# librpma-config.cmake: find_package(librpma), the package name upstream librpma installs,
# answered by softrpma: a project written for upstream's package builds against softrpma with
# CMAKE_PREFIX_PATH=<softrpma prefix> and nothing else changed. It loads softrpma's own package
# (softrpma-config.cmake: the library through this tree's librpma.pc, the target softrpma::rpma
# and the CTest helpers) and sets the variables a pkg-config search for librpma sets, which
# upstream's examples and FindLIBRPMA use:
#   LIBRPMA_FOUND, LIBRPMA_VERSION, LIBRPMA_LIBRARIES (rpma;ibverbs;rdmacm),
#   LIBRPMA_LIBRARY_DIRS (<prefix>/lib/softrpma), LIBRPMA_INCLUDE_DIRS (<prefix>/include).
include("${CMAKE_CURRENT_LIST_DIR}/../softrpma/softrpma-config.cmake")
set(librpma_FOUND TRUE)
set(librpma_VERSION "${softrpma_VERSION}")
set(LIBRPMA_FOUND TRUE)
set(LIBRPMA_VERSION "${softrpma_VERSION}")
set(LIBRPMA_LIBRARIES ${SOFTRPMA_LIBRARIES})
set(LIBRPMA_LIBRARY_DIRS ${SOFTRPMA_LIBRARY_DIRS})
set(LIBRPMA_INCLUDE_DIRS ${SOFTRPMA_INCLUDE_DIRS})
