# softrpma-config-version.cmake: the version find_package(softrpma <version>) is checked against:
# the librpma API softrpma implements (librpma.pc's Version). A request for 1.x up to 1.3 is
# met, an exact one for 1.3 or 1.3.0 too; 2.x or a later 1.x is not. Only for 64-bit builds; a
# project with no language enabled yet (project(x NONE)) has no CMAKE_SIZEOF_VOID_P and is not
# refused for it, as CMake's own version files do.
set(PACKAGE_VERSION "1.3.0")
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "${PACKAGE_VERSION} (64-bit only)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
elseif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR
       NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "1")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
