# librpma-config-version.cmake: find_package(librpma <version>) against softrpma: the same
# rule as softrpma-config-version.cmake (the librpma API softrpma implements, 1.3.0).
include("${CMAKE_CURRENT_LIST_DIR}/../softrpma/softrpma-config-version.cmake")
